"""Street addresses in free text: the part of an address that finds a door.

Pure functions over text, no I/O. :func:`find` returns the spans the write guard
(``engine/guard.py``) redacts as ``[address]``: the street and house number, and the
building, unit and room after them. The city, district, state and postcode stay, as
they do not find a door.

Each kind of address is a pattern that proposes a span and a function that says
whether it is one:

* Chinese        a street and its number ("建国路88号3栋502室") where a district or an
                 address word says it is a place, or a residential compound with a
                 building and a room ("阳光花园小区5栋2单元301")
* English        a number, a capitalised name and the street's kind ("221B Baker
                 Street", "1600 Pennsylvania Ave NW"); typed in lower case ("12 main
                 street"); a street known by its name alone ("1585 Broadway")
* Continental    the number first in French ("8 rue de Rivoli"), after the street in
                 Italian, Spanish and German ("Via Roma 12, Milano", "Calle Mayor 3",
                 "Hauptstraße 5")

A redaction cannot be undone, so where the words around a span do not say it is a
place ("Via Zoom 3", "See you at 8 Broadway", "I bought 2 Park Avenue tickets") the
span is left as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple


class Span(NamedTuple):
    start: int
    end: int
    # What the rule saw, in words (never the matched text itself).
    rule: str


# How far before a number its words are looked for ("lives at", "Chapter", "bought").
_CONTEXT_WORD = 16
# A Chinese character before a number is no part of its word ("他住在1585 Broadway").
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
_NUMBER_OPENS = rf"(?<![^\W{_CJK}]|[.,#/:$€£%+-])"


def _before(pattern: re.Pattern[str], text: str, at: int) -> bool:
    """Whether ``pattern`` (anchored with ``$``) ends just before ``at``."""
    return pattern.search(text, max(0, at - _CONTEXT_WORD), at) is not None


# --- what the words before a number say ---------------------------------------------------

# A number that counts or is a year is no house number ("the 3 Supreme Court justices", "Top
# 10 Best Way", "I bought 2 Park Avenue tickets", "in 2019 Oxford Street"), nor one with its
# label before it ("Chapter 12 The Road Home", "Season 3 Park Avenue Secrets", "Level 7
# Castle Road", "Exit 12 Garden State Parkway"; "No. 10 Downing Street" is one).
_COUNTED = re.compile(
    r"\b(?:the|top|best|first|last|next|only|all|these|those|over|under|about|around|nearly|almost|than|of|per|"
    r"every|some|many|bought|buy|buying|ordered|order|ordering|sold|sell|ate|won|lost|scored|rated|need|needs|needed|"
    r"want|wants|wanted|"
    # Bought or sold in French, Italian and Spanish: "j'ai acheté 2 Rue de la Paix" (Monopoly).
    r"acheté|achète|acheter|vendu|comprato|venduto|comprado|compré|compró|vendido)[^\S\n]{1,3}$",
    re.IGNORECASE,
)
_IN_A_YEAR = re.compile(
    r"\b(?:in|since|until|till|by|from|before|after|during|circa|early|late|mid)[^\S\n]{1,3}(?:1[89]|20)\d\d$",
    re.IGNORECASE,
)
_LABELLED = re.compile(
    r"\b(?:chapter|ch|episode|ep|season|series|part|volume|vol|book|page|pg|level|lvl|track|round|week|day|game|"
    r"step|act|scene|version|item|figure|fig|table|verse|lesson|grade|section|sec|article|hole|lap|mile|exit|gate|"
    r"seed|pick|stage|phase|tip|slide|question|problem|exercise|issue|platform|channel|bus|route|line|stop|"
    r"highway|hwy|interstate)"
    r"\.?[^\S\n]{1,3}$",
    re.IGNORECASE,
)


def _not_a_house_number(text: str, match: re.Match[str]) -> bool:
    """The number opening ``match`` is counted, labelled or a year (see above)."""
    return (
        _before(_COUNTED, text, match.start())
        or _before(_LABELLED, text, match.start())
        or _IN_A_YEAR.search(text, max(0, match.start() - _CONTEXT_WORD), match.end("number")) is not None
    )


# An English word that says a place follows: an address word ("at", "lives", "address:") or
# a label with its colon ("Home:", "Office:"). _PLACE_BEFORE also takes where one goes or
# is ("visit", "to", "on", "near") and an opening parenthesis ("Joe's Diner (12 Main St)"),
# enough for a street of the English pattern; a bare Broadway or a continental street wants
# _ADDRESS_BEFORE ("went to 3 Broadway shows").
def _said_before(words: str, *, parenthesis: bool = False) -> re.Pattern[str]:
    opening = r"|\(" if parenthesis else ""
    return re.compile(
        rf"(?:\b(?:{words})[^\S\n]{{0,3}}:?|\b(?:home|house|office|residence|headquarters|hq)[^\S\n]{{0,3}}:{opening})"
        r"[^\S\n]{0,3}$",
        re.IGNORECASE,
    )


_ADDRESS_WORDS = r"at|address|addr|lives?|lived|living|located"
_ADDRESS_BEFORE = _said_before(rf"{_ADDRESS_WORDS}|resides?|residing")
_PLACE_BEFORE = _said_before(rf"{_ADDRESS_WORDS}|visit|to|on|near", parenthesis=True)
# The same in French, Italian, Spanish and German, and the little words between it and the
# street ("wohnt am", "vivo en la", "Indirizzo:").
_ADDRESS_BEFORE_CONTINENTAL = re.compile(
    r"\b(?:adresse|anschrift|indirizzo|direcci[oó]n|domicilio|wohn(?:e|t|en|te|ten)|abit(?:o|a|iamo|ano)|"
    r"viv(?:o|e|es|imos|en)|habit(?:e|es|ons|ez|ent))[^\S\n]{0,3}:?"
    r"(?:[^\S\n]+(?:in|im|am|an|auf|der|dem|a|al|alla|en|la|el|au|à))*[^\S\n]{0,3}$",
    re.IGNORECASE,
)
# A Chinese address word shortly before a number ("住在", "地址", "寄到"); not 记住, 不住 ….
_ADDRESS_CUE = re.compile(
    r"(?<![记忍挡抓站靠保止稳卡盯守拦困顶不])住|家在|地址|位于|位置|寄到|寄往|寄至|送到|送至|送往|搬到|搬去|搬进|门牌|收件|收货"
)
_CUE_BEFORE = 12


def _cue_before(text: str, at: int) -> bool:
    return _ADDRESS_CUE.search(text, max(0, at - _CUE_BEFORE), at) is not None


# "at" before a number that may be an hour is a time ("See you at 8 Broadway", "dinner at 7
# main street"), unless a word before it says where ("lives at", "is at", "located at").
_AT_BEFORE = re.compile(r"(?:(?P<word>[\w'’]+)[^\S\n]+)?\bat[^\S\n]{1,3}$", re.IGNORECASE)
_AT_A_PLACE = frozenset(
    "live lives lived living located situated based reside resides residing is are was were".split()
)


def _at_an_hour(text: str, match: re.Match[str]) -> bool:
    at = _AT_BEFORE.search(text, max(0, match.start() - _CONTEXT_WORD), match.start())
    if at is None or int(match["number"]) > 12:
        return False
    word = (at["word"] or "").lower().replace("’", "'")
    return word not in _AT_A_PLACE and not word.endswith("'s")  # "the studio's at 8 Broadway"


# --- what may follow a street ---------------------------------------------------------------

# Each kind of street allows its own things after it: the end of its clause, a comma, a
# postcode, a city. These patterns are only ever read with .match at the street's end: under
# .search or .finditer the leading [^\S\n]* makes them quadratic in a run of spaces.
_CLAUSE_END = r"[^\S\n]*(?:$|[\n;)]|\.(?!\w))"
_COMMA = r"[^\S\n]*,"
_ZIP = r",?[^\S\n]{1,3}\d{5}\b"
_POSTCODE = r",?[^\S\n]{1,3}\d{4,5}\b"
_IN_A_CITY = r"[^\S\n]{1,3}(?:in|im|a|à|en|di)[^\S\n]+[A-ZÀ-Þ]"


def _one_of(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(parts))


# Lower case: a comma, the end of the line or a ZIP code ("we walked 12 main street blocks").
_AFTER_LOWER_CASE_STREET = _one_of(_CLAUSE_END, _COMMA, _ZIP)
# Broadway: the end of the sentence, a ZIP code, or a city ("…, New York", "…, New York, NY").
_AFTER_BARE_STREET = _one_of(
    _CLAUSE_END, _ZIP, r",[^\S\n]{0,3}(?:[A-Z][a-z]+[^\S\n]?){1,3}(?=$|[\n,.;)]|[^\S\n]*\d{5}\b|[A-Z]{2}\b)"
)
# A sentence that goes on after a place with a word that counts nothing: a time, a
# preposition, a conjunction ("I met him on Via Roma 12 last week", "… with her sister",
# "… and Piazza Garibaldi 3"), in English and the street's own languages. Not a noun: the
# number may count it ("Via Zoom 3 times", "Marienplatz 2 Stunden").
_SENTENCE_GOES_ON = (
    r"[^\S\n]{1,3}(?:last|this|next|yesterday|today|tonight|tomorrow|for|with|since|until|till|before|after|"
    r"during|near|and|but|or|when|where|while|because|which|that|is|are|was|were|und|mit|seit|e|con|y|et|avec)\b"
)
# Number after the street: a comma, a postcode, a dash, "in" a place or the sentence going
# on ("Marienplatz 2 Stunden" is a stay of two hours).
_AFTER_CONTINENTAL_STREET = _one_of(
    _CLAUSE_END, _COMMA, _POSTCODE, r"[^\S\n]{1,3}-[^\S\n]", _IN_A_CITY, _SENTENCE_GOES_ON
)
# What of that says a place: a postcode, "in" a place, or a city that ends the clause.
_CITY = r"[A-ZÀ-Þ][\w'’-]+(?:[^\S\n][A-ZÀ-Þ][\w'’-]+){0,2}"
_PLACE_AFTER_CONTINENTAL = _one_of(_POSTCODE, _IN_A_CITY, rf",[^\S\n]{{0,3}}{_CITY}(?:{_CLAUSE_END}|{_COMMA})")
# A capitalised word or a ZIP code after an English street with a short number.
_CITY_AFTER = re.compile(r",?[^\S\n]{1,3}[A-Z][a-z]+|[^\S\n]{1,3}\d{5}\b")
_CITY_STATE_ZIP = re.compile(r",[^\S\n]{0,3}(?:[A-Z][a-z]+[^\S\n]?){1,3},?[^\S\n]{1,3}[A-Z]{2}[^\S\n]{1,3}\d{5}\b")


# --- Chinese ----------------------------------------------------------------------------------

# A street and its house number ("建国路88号", "世纪大道100号3栋502室"), or a residential
# compound with a building and a room ("阳光花园小区5栋2单元301"), and the building, unit,
# floor and room after them. A name is two to eight Han characters, none of them a word
# that ends the place before it (市, 区 …) or a function word (在, 的, 去 …), so "住在建国路
# 88号" gives "建国路" and "这条路" or "逛街" is no street.
_NAME_CHAR = r"(?:(?![省市区县镇乡旗的在是到住于了和与及或从往向去来把给这那条个我你他她它们])[\u4e00-\u9fff])"
_UNIT = r"(?:[A-Za-z]|\d{1,4})(?:号楼|栋|幢|座|单元|层|楼|室|号|户)"
# A number after a building that is a date or a time of day ("3栋2点", "3号楼20:30") is no room.
_NOT_A_TIME = r"(?![\d年月日号点时分:：])"
_ROOM = rf"(?:{_UNIT})*(?:(?<=[栋幢座元楼层])\d{{2,4}}{_NOT_A_TIME})?"
_STREET = re.compile(
    rf"(?P<name>{_NAME_CHAR}{{2,8}}?(?:路|街|大道|大街|巷|胡同)(?:[东南西北中]?[一二三四五六七八九十\d]{{1,2}}段)?)"
    r"(?P<number>\d{1,5})(?:-\d{1,5})?(?:号院?|弄)(?!线)"
    rf"(?P<tail>(?:{_NAME_CHAR}{{2,10}}?(?:小区|花园|公寓|家园|新村|苑|居民点|社区|大厦|广场|大楼|中心))?{_ROOM})"
)
_COMPOUND = re.compile(
    rf"{_NAME_CHAR}{{2,8}}?(?:小区|花园|公寓|家园|新村|苑)(?:[A-Za-z]|\d{{1,4}})(?:号楼|栋|幢|座)"
    rf"(?:\d{{1,3}}单元)?(?:\d{{1,3}}[层楼])?(?:\d{{1,4}}(?:室|号|户)?|[A-Za-z]\d{{0,4}}){_NOT_A_TIME}(?![A-Za-z层楼])"
)
# What says a street number is a place: an address word shortly before it (_ADDRESS_CUE), or
# a division just before the street ("朝阳区建国路"). A number up to 31 with nothing after
# it may be the day of a month ("全市主要道路3号封闭", "人民路5号前交房租"): it wants the
# address word or a city and its district ("北京市朝阳区建国路8号"), and no time word after it.
_DIVISIONS = re.compile(r"(?:省|市|自治区|州|盟)(?:(?![省市])[\u4e00-\u9fff]){1,5}(?:区|县|市|旗)$")
_DATE_AFTER = re.compile(
    r"上午|下午|中午|晚上|早上|凌晨|之前|以前|之后|以后|前|后|起|开始|到|至|为止|那天|当天|左右|星期|周|见|出发"
)


def _chinese_street_address(text: str, match: re.Match[str]) -> bool:
    start = match.start()
    cue = _cue_before(text, start)
    if int(match["number"]) > 31 or match["tail"]:
        return cue or (start > 0 and text[start - 1] in "省市区县镇乡旗")
    place = cue or _DIVISIONS.search(text, max(0, start - 12), start) is not None
    return place and _DATE_AFTER.match(text, match.end()) is None


# --- English ----------------------------------------------------------------------------------

# A house number, the street's name and its kind ("221B Baker Street", "1600 Pennsylvania Ave
# NW", "350 W 34th St.", "12 Main St., Apt 4"), and the unit after them. A street without a
# house number is no address ("I ran 5 miles on Main Street": the number is not the
# street's). The name is one to four capitalised words or an ordinal ("5 big roads" is
# none). A number of one or two digits before an abbreviation ("5 San Diego St.", "7
# Michigan St": a seed and a team, State) wants more: a word that says it is a place before
# it (_PLACE_BEFORE), a unit, or a city after it.
_EN_STREET_KIND = (
    r"(?:Street|Avenue|Road|Boulevard|Drive|Lane|Court|Place|Terrace|Way|Highway|Parkway|Circle|Square|Expressway|"
    r"Crescent|Close|Alley|Row|Plaza|Loop|Trail)"
)
_EN_STREET_ABBREVIATION = r"(?:St|Ave?|Rd|Blvd|Dr|Ln|Ct|Pl|Ter|Hwy|Pkwy|Cir|Sq|Expy|Cres)"
_EN_STREET = re.compile(
    r"(?<![\w.,#/:$€£%+-])(?P<number>\d{1,6})[A-Za-z]?(?:-\d{1,6})?(?![\w.,:/%-])[^\S\n]{1,3}"
    r"(?:(?:[NSEW]|North|South|East|West)\.?[^\S\n]{1,3})?"
    r"(?:(?:[A-Z][a-z]+|[A-Z]\.|\d{1,3}(?:st|nd|rd|th))[^\S\n]{1,3}){1,4}?"
    rf"(?:(?P<kind>{_EN_STREET_KIND}|{_EN_STREET_KIND.lower()})|{_EN_STREET_ABBREVIATION})\b\.?"
    r"(?:[^\S\n]{1,3}(?:NW|NE|SW|SE|N|S|E|W)\b\.?)?"
    r"(?P<unit>,?[^\S\n]{1,3}(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Room|Rm|#)\.?[^\S\n]{0,3}#?[A-Za-z0-9-]{1,6}\b)?"
)


def _english_street_address(text: str, match: re.Match[str]) -> bool:
    if _not_a_house_number(text, match):
        return False
    if len(match["number"]) > 2 or match["kind"] or match["unit"]:
        return True
    said_before = _before(_PLACE_BEFORE, text, match.start()) and not _at_an_hour(text, match)
    return said_before or _CITY_AFTER.match(text, match.end()) is not None


# Typed in lower case ("12 main street", "i live at 45 oak avenue"), a name is any word, so
# the rest must say it is a place: the street's word in full and one that names only a
# street (not "drive", "way" or "lane": "a 10 minute drive", "a 2 way street"), an address
# word before it or a line of its own, and nothing after it but a unit, a comma, the end
# of the line or a ZIP code (_AFTER_LOWER_CASE_STREET).
_EN_STREET_LOWER = re.compile(
    rf"{_NUMBER_OPENS}(?P<number>\d{{1,6}})[a-z]?(?:-\d{{1,6}})?(?![\w.,:/%-])[^\S\n]{{1,3}}"
    r"(?P<name>(?:[a-z]+[^\S\n]{1,3}){1,3}?)(?:street|avenue|road|boulevard)\b\.?"
    r"(?:,?[^\S\n]{1,3}(?:apt|apartment|suite|ste|unit|#)\.?[^\S\n]{0,3}#?[a-z0-9-]{1,6}\b)?"
)
_NOT_A_STREET_NAME = frozenset(
    "a an the my your his her our their its this that these those of to in on at for and or by with from "
    "minute minutes hour hours mile miles block blocks lane lanes way ways side "
    # A time, then where: "we met at 7 near main street", "at 6 am wall street".
    "am pm near outside inside via past down up along across behind beyond toward towards opposite beside into "
    "onto through over under around off".split()
)
_LINE_START = re.compile(r"(?:^|\n)[^\S\n]*(?:[-*•][^\S\n]*)?$")
# A line of its own beside another that opens with a number is an item in a numbered list
# ("top songs:\n1 penny lane\n2 abbey road", "1 sunset boulevard\n2 mulholland drive").
_NUMBERED_LINE = re.compile(r"[^\S\n]*(?:[-*•][^\S\n]*)?\d{1,3}[.)]?[^\S\n]")


def _lower_case_street_address(text: str, match: re.Match[str]) -> bool:
    if _not_a_house_number(text, match) or any(word in _NOT_A_STREET_NAME for word in match["name"].split()):
        return False
    said_before = _before(_PLACE_BEFORE, text, match.start()) or _cue_before(text, match.start())
    placed = (said_before and not _at_an_hour(text, match)) or (
        _before(_LINE_START, text, match.start()) and not _a_list_item(text, match)
    )
    return placed and _AFTER_LOWER_CASE_STREET.match(text, match.end()) is not None


def _a_list_item(text: str, match: re.Match[str]) -> bool:
    """Whether a line that opens with a street is an item in a numbered list: it opens
    with 1, a list's head or a list of one ("1 sunset boulevard"), or the line before or
    after it opens with a number."""
    if match["number"] == "1":
        return True
    here = text.rfind("\n", 0, match.start())
    if here > 0 and _NUMBERED_LINE.match(text, text.rfind("\n", 0, here) + 1) is not None:
        return True
    after = text.find("\n", match.end())
    return after >= 0 and _NUMBERED_LINE.match(text, after + 1) is not None


# A street well known by its name alone ("1585 Broadway") is a show as often ("17 Broadway
# shows", "3 Broadway musicals"): only after an address word (_ADDRESS_BEFORE, _ADDRESS_CUE),
# with nothing after it but the end of the sentence, a city or a ZIP code; or, with no
# word before it, followed by its city, state and ZIP code ("867 Broadway, New York, NY
# 10003").
_BARE_STREET_NAMES = r"(?:Broadway)"
_BARE_STREET = re.compile(
    rf"{_NUMBER_OPENS}(?P<number>\d{{1,6}})[A-Za-z]?(?![\w.,:/%-])[^\S\n]{{1,3}}{_BARE_STREET_NAMES}\b"
)


def _bare_street_address(text: str, match: re.Match[str]) -> bool:
    if _CITY_STATE_ZIP.match(text, match.end()) is not None:
        return True
    said_before = _before(_ADDRESS_BEFORE, text, match.start()) and not _at_an_hour(text, match)
    placed = said_before or _cue_before(text, match.start())
    return placed and _AFTER_BARE_STREET.match(text, match.end()) is not None


# --- French, Italian, Spanish and German ------------------------------------------------------

# Written as those languages write them: the number before the street's word in French ("8
# rue de Rivoli", "15 avenue des Champs-Élysées"), after the street in the others ("Via Roma
# 12", "Calle Mayor 3", "Hauptstraße 5", "Potsdamer Platz 1"). The name is capitalised words
# and the particles between them (de, del, des, von …).
_STREET_PARTICLE = r"(?:de|del|della|delle|dei|degli|dello|di|da|du|des|la|le|les|el|los|las|von|van|der|den|d'|l')"
# A particle is a word of its own, or elided ("rue d'Alésia"): in "avenue laPlaya" it opens a name.
_PARTICLE_ENDS = r"(?=[^\S\n]|(?<='))"
_CAPITALISED = r"[A-ZÀ-ÖØ-Þ][\w'’-]+"
_CONTINENTAL_NAME = (
    rf"(?:{_STREET_PARTICLE}[^\S\n]?){{0,2}}{_CAPITALISED}"
    rf"(?:[^\S\n](?:{_STREET_PARTICLE}[^\S\n]?){{0,2}}{_CAPITALISED}){{0,3}}"
)
# Glued to Chinese, only after a Chinese address word: "我住在Via Roma 12", not "我用Via Zoom 3".
_CJK_BEFORE = re.compile(rf"[{_CJK}]")


def _glued_to_chinese(text: str, match: re.Match[str]) -> bool:
    return _CJK_BEFORE.match(text, max(0, match.start() - 1)) is not None and not _cue_before(text, match.start())


# Number first. "avenue" and "boulevard" are English words too, so after them the name opens
# with a particle, a city follows ("12 boulevard Haussmann, Paris") or an address word comes
# before; "rue" is French alone.
_STREET_WORD_FIRST = r"(?:rue|Rue|avenue|Avenue|boulevard|Boulevard)"
_NUMBER_FIRST_STREET = re.compile(
    rf"{_NUMBER_OPENS}(?P<number>\d{{1,4}})(?:[^\S\n]?(?:bis|ter)|[A-Za-z])?(?![\w.:/%-]),?[^\S\n]{{1,3}}"
    rf"(?P<word>{_STREET_WORD_FIRST})[^\S\n]{{1,3}}(?:(?P<particle>{_STREET_PARTICLE}){_PARTICLE_ENDS})?[^\S\n]?"
    rf"{_CONTINENTAL_NAME}"
)


def _number_first_street_address(text: str, match: re.Match[str]) -> bool:
    if _glued_to_chinese(text, match) or _not_a_house_number(text, match):
        return False
    return (
        match["word"].lower() == "rue"
        or match["particle"] is not None
        or _CITY_AFTER.match(text, match.end()) is not None
        or _before(_ADDRESS_BEFORE, text, match.start())
    )


# Number after: the street's word before the name ("Via", "Calle"; a lower-case "via" or
# "piazza" only after the Italian "in": "abito in via Garibaldi 7"), in it ("Hauptstraße",
# "Marienplatz") or after an adjective ("Potsdamer Platz"; two words are that, not a team
# and its rank: "Bayern Platz 1"). Nothing may follow the number but what
# _AFTER_CONTINENTAL_STREET allows. A road's number is no house number ("Via Route 66", "Via
# Highway 1").
_STREET_WORD_BEFORE_NAME = r"(?:Via|Viale|Piazza|Calle|calle|(?<=\bin[^\S\n])(?:via|viale|piazza))"
_STREET_WORD_IN_NAME = r"(?:straße|strasse|str\.|platz)"
_STREET_WORD_AFTER_NAME = r"(?:Straße|Strasse|Str\.|Platz)"
_NUMBER_AFTER_STREET = re.compile(
    rf"(?<![^\W{_CJK}]|['’-])(?:(?P<word>{_STREET_WORD_BEFORE_NAME})[^\S\n]{{1,3}}(?P<name>{_CONTINENTAL_NAME})"
    rf"|(?P<compound>[A-ZÄÖÜ][a-zäöüß]+)(?P<suffix>{_STREET_WORD_IN_NAME})"
    rf"|[A-ZÄÖÜ][a-zäöüß]+er[^\S\n](?P<after>{_STREET_WORD_AFTER_NAME}))"
    r",?[^\S\n]{1,3}(?P<number>\d{1,4}[a-z]?(?:[-/]\d{1,4}[a-z]?)?)(?![\w/%-]|[.,:]\d)"
)
# Not a street: a word in title case before "Via" ("How to Transfer Files Via USB 3"), a name
# with capitals inside it ("Via HDMI 2", "Via PayPal 3"; a Roman numeral is one: "Via XX
# Settembre 20"), a year ("Via Roma 2020", "Potsdamer Platz 2019"), and German places that
# are no square and roads known by their number ("Tabellenplatz 3", "Stellplatz 12",
# "Bundesstraße 96").
_TITLE_CASE_BEFORE = re.compile(r"\b[A-Z][\w'’-]*[^\S\n]+$")
_CAPITALS_INSIDE = re.compile(r"(?![IVXLCDM]+\b)\S*(?:[a-z][A-Z]|[A-Z]{2})")
_A_YEAR = re.compile(r"(?:19|20)\d\d")
_NOT_A_SQUARE = frozenset(
    "tabellen stell arbeits start sitz steh liege studien ausbildungs kita krippen heim pflege park "
    "bundes staats kreis einbahn".split()
)
# Via, Piazza, Calle and Platz name a product, a country, a film, a playground or a pitch
# as often as a street ("Via Zoom 3", "Via Windows 11", "Piazza Italia 3", "Calle Ocho 2",
# "Spielplatz 3"): alone they are left, and "Via Roma 12" with them. They want a sign that
# it is a place: an address word before ("at", "Indirizzo:", "wohnt am", "vivo en", "住在"),
# a postcode or a city after ("…, 00184 Roma", "…, Milano", "… a Milano"), a particle or
# a comma in it ("Via del Corso, 120"), or the Italian "in via". Straße and Viale say it
# themselves.
_PARTICLE_IN_NAME = re.compile(rf"(?:^|[^\S\n]){_STREET_PARTICLE}{_PARTICLE_ENDS}")
_SAYS_A_STREET = frozenset({"viale", "straße", "strasse", "str."})
# The names Italy gives its streets and squares most, a city or a figure of its history,
# which no product, film or country takes: "Via Roma 12" alone is an address ("Via Zoom 3",
# "Piazza Italia 3" are not).
_ITALIAN_STREET_NAMES = frozenset(
    """Roma Milano Torino Napoli Firenze Venezia Bologna Genova Garibaldi Mazzini Cavour Dante Verdi Marconi
    Matteotti Manzoni Gramsci Nazionale Colombo Leopardi Carducci""".split()
)


def _number_after_street_address(text: str, match: re.Match[str]) -> bool:
    if _glued_to_chinese(text, match):
        return False
    if match["word"] is not None and (
        (_before(_TITLE_CASE_BEFORE, text, match.start()) and match["word"][0].isupper())
        or any(_CAPITALS_INSIDE.match(word) for word in match["name"].split())
    ):
        return False
    return (
        _LABELLED.search(text, max(0, match.start() - _CONTEXT_WORD), match.start("number")) is None
        and _AFTER_CONTINENTAL_STREET.match(text, match.end()) is not None
        and _a_sign_of_a_place(text, match)
        and _A_YEAR.fullmatch(match["number"]) is None
        and (match["compound"] is None or match["compound"].lower() not in _NOT_A_SQUARE)
    )


def _a_sign_of_a_place(text: str, match: re.Match[str]) -> bool:
    word = match["word"] or match["suffix"] or match["after"]
    return (
        word.lower() in _SAYS_A_STREET
        or word in ("via", "piazza")  # lower case only after "in" (_STREET_WORD_BEFORE_NAME)
        or (word in ("Via", "Piazza") and match["name"] in _ITALIAN_STREET_NAMES)
        or "," in text[match.start() : match.start("number")]
        or (match["name"] is not None and _PARTICLE_IN_NAME.search(match["name"]) is not None)
        or _PLACE_AFTER_CONTINENTAL.match(text, match.end()) is not None
        or _before(_ADDRESS_BEFORE, text, match.start())
        or _before(_ADDRESS_BEFORE_CONTINENTAL, text, match.start())
        or _cue_before(text, match.start())
    )


# --- all of them --------------------------------------------------------------------------------

_STREETS: tuple[tuple[re.Pattern[str], Callable[[str, re.Match[str]], bool], str], ...] = (
    (_STREET, _chinese_street_address, "Chinese street address"),
    (_COMPOUND, lambda text, match: True, "Chinese residential address"),
    (_EN_STREET, _english_street_address, "street address"),
    (_EN_STREET_LOWER, _lower_case_street_address, "street address"),
    (_BARE_STREET, _bare_street_address, "street address"),
    (_NUMBER_FIRST_STREET, _number_first_street_address, "street address"),
    (_NUMBER_AFTER_STREET, _number_after_street_address, "street address"),
)


def find(text: str) -> list[Span]:
    """Every street address in ``text``, kind by kind in the order above; spans of
    different kinds may overlap (the guard keeps the first)."""
    return [
        Span(match.start(), match.end(), rule)
        for pattern, is_address, rule in _STREETS
        for match in pattern.finditer(text)
        if is_address(text, match)
    ]
