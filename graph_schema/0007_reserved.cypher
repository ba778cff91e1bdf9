// Intentionally empty: this number carries no schema change.
