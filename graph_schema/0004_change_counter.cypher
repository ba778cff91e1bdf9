// The change sequence's counter: every write transaction takes the next numbers from it.
MERGE (c:Counter {name: 'changes'})
ON CREATE SET c.seq = 0;
