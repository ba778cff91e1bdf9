"""What of a conversation is worth keeping: the built-in rules, English and Chinese.

Pure functions over one message at a time. A user's message is cut into sentences;
each sentence the rules recognise becomes a ``Candidate`` with a category:

* explicit requests — "remember that …", "please note …", "记住…", "帮我记一下…"
  (category from what follows);
* self-statements — name ("my name is", "我叫"), home, work, family, pets,
  allergies and health conditions, languages, what they have ("I live in", "我住在", "我对花生过敏") → ``fact``;
* preferences — "I like / love / prefer / hate / can't stand", "my favourite",
  "我喜欢", "我不吃", "我最爱" → ``preference``;
* passing states — a self-statement bounded in time ("I'm vegetarian this week",
  "我这几天在出差") → ``state``;
* decisions — "I decided", "let's go with", "we'll use", "我决定", "就用…吧" → ``fact``;
* commitments — an obligation or plan with a time ("I need to renew my passport",
  "remind me to …", "I'll call the dentist tomorrow", "我明天要…", "提醒我…") → ``task``.

Dropped: questions, greetings, thanks and reactions, requests for the current task
("write me a poem"), hedges ("I'm not sure", "maybe"), small talk, and everything the
assistant, the system or a tool says (the user's own words are what
``source = user_input`` claims). When in doubt a rule keeps nothing: a missed fact
costs one memory, a kept piece of chit-chat costs every later recall a slot.

Measured on ``tests/data/extraction.jsonl`` by ``benchmarks/extraction.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.session_records import Candidate, Role

_CJK = re.compile(r"[\u4e00-\u9fff]")
# An English mark ends a sentence before a blank, a capital or a Han character, so the
# dot of an address, a version or a decimal ("marco@example.com", "3.12") cuts nothing.
_SENTENCE_END = re.compile(r"(?<=[.!?;])(?:\s+|(?=[A-Z\u4e00-\u9fff]))|(?<=[。！？；])\s*|\n+")
_MIN_WORDS = 2
_MIN_HAN = 3

# --- English -------------------------------------------------------------------------

_EN_EXPLICIT = re.compile(
    r"^(?:ok(?:ay)?[,.]?\s+|oh[,.]?\s+|also[,.]?\s+|and\s+|btw[,.]?\s+)?(?:please\s+|pls\s+)?"
    r"(?:remember|note|keep in mind|make a note|take note|don'?t forget|do not forget|never forget|"
    r"for (?:future )?reference|for the record|just so you know|fyi|note to self)"
    r"(?:\s+(?:that|this))?\s*[:,-]?\s+(?P<rest>.+)$",
    re.IGNORECASE,
)
_EN_REMIND = re.compile(r"^(?:please\s+|can you\s+|could you\s+)?remind me (?:to|that|about)\b", re.IGNORECASE)
_EN_QUESTION_START = re.compile(
    r"^(?:what|how|why|when|where|who|whom|which|whose|can|could|would|will|should|shall|do|does|did|is|are|"
    r"was|were|have|has|may|might|any idea|any tips)\b",
    re.IGNORECASE,
)
_EN_CHITCHAT = re.compile(
    r"^(?:hi|hey|hello|yo|good (?:morning|afternoon|evening|night)|thanks?|thank you|thx|ok(?:ay)?|cool|"
    r"great|nice|awesome|perfect|sure|yes|yeah|yep|no|nope|lol|haha|wow|sounds good|got it|bye|see you|"
    r"never ?mind|no worries|that'?s (?:great|cool|nice|interesting|funny|fine|right|true|helpful)|"
    r"interesting|i see|i agree|i know|i understand|i mean|me too|same here|exactly|right)\b",
    re.IGNORECASE,
)
_EN_HEDGE = re.compile(
    r"\b(?:i'?m not sure|not sure|i don'?t know|i have no idea|maybe|perhaps|i guess|i wonder|i was wondering|"
    r"i'?m wondering|i might|i may|probably|if i|i would|i'?d (?:like|love) to know|just curious|"
    r"i have a question|i'?m (?:fine|good|ok|okay|doing well|just asking)|i think so|i hope)\b",
    re.IGNORECASE,
)
_EN_TASK_REQUEST = re.compile(
    r"^(?:please\s+)?(?:write|draft|give|tell|show|list|summari[sz]e|translate|explain|generate|create|make|find|"
    r"help|suggest|recommend|compare|describe|calculate|fix|check|rewrite|plan|book)\b",
    re.IGNORECASE,
)
_EN_TIME = re.compile(
    r"\b(?:this (?:week|month|weekend|year|morning|evening|afternoon)|today|tonight|tomorrow|right now|currently|"
    r"for now|these days|at the moment|for the next|until|till|next (?:week|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"by (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|the end|tomorrow|next)|"
    r"before (?:the|my|next)|in (?:\w+ )?(?:days|weeks|months)|at \d|\d{1,2}(?::\d\d)?\s?(?:am|pm))\b",
    re.IGNORECASE,
)
_I = r"(?:i|we)"
_EN_NAME = re.compile(r"\b(?:my name is|my name'?s|call me|i'?m called|i go by|people call me)\s+\w", re.IGNORECASE)
_EN_PREFERENCE = re.compile(
    r"\b(?:" + _I + r"(?: really| absolutely| totally| kind of| kinda| much| truly| do| still)?"
    r" (?:like|love|enjoy|prefer|adore|hate|dislike|detest|loathe|can'?t stand|cannot stand|despise)|"
    + _I
    + r" (?:don'?t|do not|never|rarely) (?:like|enjoy|eat|drink|use|want|watch|fly)|"
    + _I
    + r"'?(?: a|')?m (?:not )?(?:a (?:big |huge )?fan of|into|obsessed with|not big on)|"
    r"(?:i am|i'm) (?:vegan|vegetarian|pescatarian|lactose intolerant|gluten[- ]free|a vegetarian|a vegan)|"
    r"my (?:favou?rite|preferred|go-to)\b|i'?d rather\b|i always (?:take|order|drink|eat|choose|pick|use)|"
    r"i (?:usually|always|never) (?:eat|drink|take|order|read|listen|wear|use|go)|i take my)",
    re.IGNORECASE,
)
_EN_FACT = re.compile(
    r"\b(?:" + _I + r" (?:live|lived|work|worked|study|studied|grew up|was born|were born|moved|relocated|"
    r"stay|teach|speak|own|drive|ride|run|coach|volunteer|manage|lead)\b|"
    + _I
    + r" (?:have|'ve got|have got|had) (?:a|an|two|three|four|five|\d+|no|some)\b|"
    + _I
    + r"'?(?: a|')?m (?:a|an) \w+|i am (?:a|an) \w+|i'?m \d+|i am \d+|i turned \d+|"
    + _I
    + r"'?(?:re| are) (?:expecting|getting married|engaged|married|divorced|moving|retired)|"
    r"i'?m (?:married|single|engaged|retired|pregnant|left-handed|right-handed|colou?r-?blind|diabetic|from|"
    r"getting married|allergic to)\b|i have (?:a|an) \w+ allergy|"
    r"i am (?:married|single|engaged|retired|pregnant|left-handed|right-handed|colou?r-?blind|diabetic|from|"
    r"allergic to)\b|"
    # Health: a condition had, lived with, diagnosed or treated ("I have type 1 diabetes",
    # "I've been dealing with migraines", "I take insulin").
    r"i(?: have|'ve got| have got| live with|(?:'ve been| have been|'m| am) (?:living|dealing|struggling) with) "
    r"(?:type [12] |chronic |severe |mild )?(?:diabetes|asthma|epilepsy|"
    r"arthritis|eczema|migraines|hypertension|high blood pressure|adhd|autism|dyslexia|depression|anxiety|"
    # Not a word's first part ("depression-era"), a worry ("anxiety about the exam"), a time
    # of year ("the allergy season") nor someone else's ("dealing with his anxiety disorder").
    r"(?!(?:his|her|their|your|its)\b)(?:\w+ ){1,2}(?:disease|syndrome|disorder|intolerance|allergy|allergies))"
    r"\b(?!-| about\b| over\b| before\b| season\b)|"
    # Not "the heat" nor "the same problem": "the" only before an illness that comes back;
    # not someone else's ("his snoring").
    r"i (?:suffer|suffered) from (?!(?:the|his|her|their|your|its)\b)|"
    r"i (?:suffer|suffered) from the (?:flu|common cold)\b|"
    r"i(?: was|'ve been| have been| got| just got) diagnosed with\b(?! nothing\b)|"
    r"i'?m (?:on|taking) (?:insulin|medication|antidepressants|blood thinners|chemo(?:therapy)?)\b|"
    r"i am (?:on|taking) (?:insulin|medication|antidepressants|blood thinners|chemo(?:therapy)?)\b|"
    r"(?:my|our) (?:\w+ ){0,2}(?:is|are|was|lives|live|works|work|has|have|loves|likes|hates|turns|starts|"
    r"started|ends|costs|runs|named|called|plays|studies|goes|uses|use|owns|teaches)\b|"
    r"i (?:just )?(?:got|bought|adopted|started|joined|switched to|quit|"
    r"stopped|gave up|signed up for|enrolled in|passed|graduated))",
    re.IGNORECASE,
)
_EN_DECISION = re.compile(
    r"\b(?:"
    + _I
    + r"(?:'ve| have)?(?: decided| chosen| chose| picked| settled on| went with| are going with|'re going "
    r"with|'m going with| am going with| will go with|'ll go with| agreed)|let'?s (?:go with|use|stick with|do|"
    r"book|pick|choose|meet)|" + _I + r"(?:'ll| will) (?:use|stick with|take)|final (?:answer|decision)|"
    r"the plan is)\b",
    re.IGNORECASE,
)
_EN_COMMITMENT = re.compile(
    r"\b(?:i|we)(?:'ll|'m going to|'re going to|'m gonna|'ve got to| will| need to| have to| must| should|"
    r" promised| plan to| intend to| am going to| are going to| am gonna| have got to| gotta)\b|"
    r"\bmy (?:deadline|appointment|meeting|flight|interview|exam)\b",
    re.IGNORECASE,
)
_EN_APPOINTMENT = re.compile(
    r"\bi have (?:a|an) (?:meeting|appointment|call|interview|exam|flight|deadline|dentist|doctor)", re.IGNORECASE
)
_EN_NOW = re.compile(
    r"\b(?:this (?:week|month|weekend|year)|today|tonight|right now|currently|for now|these days|at the moment|"
    r"until|till|for the next|all (?:week|weekend|month))\b",
    re.IGNORECASE,
)
_EN_STATE = re.compile(
    r"\b(?:i'?m|i am|we'?re|we are) (?:currently |still |now )?(?:on call|on vacation|on holiday|on leave|on a diet|"
    r"travell?ing|recovering|sick|ill|off work|working from|staying|fasting|on a cleanse|between jobs|"
    r"trying to (?:cut|eat|drink|avoid|lose|quit|reduce|stay off|give up|sleep)|cutting (?:down|back)|"
    r"off (?:sugar|alcohol|caffeine|carbs|meat|dairy|coffee))\b",
    re.IGNORECASE,
)

# --- Chinese -------------------------------------------------------------------------

_ZH_EXPLICIT = re.compile(
    r"^(?:对了[，,]?|还有[，,]?|另外[，,]?)?(?:请你?|麻烦你?)?(?:帮我)?(?:记住|记下|记一下|记好|记着|别忘了|不要忘了|千万别忘了|备忘一下|备注一下|"
    r"你要记得|要记得|记得)(?:[:：，,]|这个|这件事)?\s*(?P<rest>.+)$"
)
_ZH_REMIND = re.compile(r"^(?:请|麻烦|你)?(?:到时候)?提醒我")
_ZH_QUESTION = re.compile(
    r"(?:[吗呢么嘛][？?。！!]?$|[？?]|什么|怎么|为什么|为啥|哪|谁|几点|多少|如何|"
    r"是不是|有没有|能不能|可不可以|要不要)"
)
_ZH_CHITCHAT = re.compile(
    r"^(?:你好|您好|嗨|哈喽|早上好|下午好|晚上好|晚安|谢谢|多谢|感谢|好的|好吧|嗯|哦|噢|哈哈|呵呵|"
    r"没事|没关系|不客气|拜拜|再见|"
    r"对|是的|对的|明白|知道了|收到|可以|行|好呀|好啊|太好了|真棒|厉害|不错|有意思|原来如此|我明白了|我知道了|懂了)"
)
_ZH_HEDGE = re.compile(
    r"(?:不确定|不知道|可能|也许|大概|或许|好像|说不定|我猜|我觉得吧|如果|要是|假如|随便问问|就是问问|我想知道|我在想)"
)
_ZH_TASK_REQUEST = re.compile(
    r"^(?:请|麻烦|帮我|给我|你)?(?:帮我|给我)?(?:写|翻译|总结|解释|列出|推荐|生成|算|查|找|讲|介绍|改|画|设计|做)"
)
_ZH_TIME = re.compile(
    r"(?:这周|这个星期|本周|这个月|这几天|这段时间|最近|今天|今晚|明天|后天|目前|现在|暂时|下周|下个月|周[一二三四五六日末]|星期[一二三四五六日天]|"
    r"[\d一二三四五六七八九十两]+(?:号|日|点)|早上|上午|中午|下午|晚上|明年|下星期|月底|年底|之前|以前要|这学期|这个周末)"
)
_ZH_NAME = re.compile(r"(?:我叫|我的名字是|我名字叫|叫我|我的英文名是|我姓)")
_ZH_PREFERENCE = re.compile(
    r"(?:我|我们)(?:很|非常|特别|最|比较|超|真的|一直|从来|都|也|还是|更)?(?:不太|不怎么|不)?"
    r"(?:喜欢|爱吃|爱喝|爱看|爱听|爱玩|热爱|讨厌|偏好|偏爱|受不了|吃不了|吃不惯|喝不了|不吃|不喝|怕|迷上|钟爱)|"
    r"我最(?:爱|喜欢)|我最喜欢的|我(?:很|超|特别|非常|真的|挺|好)爱(?!人)|我(?:不太|不怎么|不大|不)(?:能|敢)(?:吃|喝)|"
    r"我[^，。！？]{1,8}?(?:一般都|通常都|每次都|向来|一向)|我(?:是|吃)素|我(?:更)?(?:习惯|倾向于)|我(?:一般|通常|总是|每天)|我是.{1,12}的(?:忠实)?(?:粉丝|迷)"
)
_ZH_FACT = re.compile(
    r"我(?:是|有点)?(?:左撇子|右撇子|色盲|独生子|独生女|素食者|糖尿病人)|不耐受|我对.{1,12}过敏|"
    # Health: a condition had or diagnosed ("我有糖尿病", "我被诊断出哮喘").
    r"我(?:一直|从小|小时候|去年|今年|前年|最近|上个月)?(?:有|患有|患了|得了|得过|确诊了?|被确诊(?:为|了)?|"
    # Not a worry or hearsay about one ("我有点担心高血压", "我有听说过这种病").
    r"被诊断(?:出|为)?)(?:[一二12]型)?(?:(?!担心|害怕|怕|听说|关于)[^，。！？吗]){0,6}?(?:病|症|哮喘|过敏|高血压|高血脂|贫血|失眠)|"
    r"(?:我|我们)(?:团队|公司|家)?[^，。！？]{0,10}?(?:用|开的是|开了一家|在.{1,10}教|办公|领养了|收养了|戒烟|戒酒|戒了|开始学|已经结婚|"
    r"[一二三四五六七八九十两]+岁)|"
    r"(?:我|我们)(?:家)?(?:现在|目前|一直|去年|前年|今年|上个月|上周|上星期|昨天|前天|前几天|最近|已经|早就|\d+年)*"
    r"(?:住在|住|在.{1,15}(?:工作|上班|上学|读书|读研|念书|读的|学的|念的|读过|毕业)|来自|出生在|出生于|老家(?:是|在)|"
    r"搬到|搬去|毕业于|是(?:一名|一个|一位|个|名)?.{0,12}(?:人|师|员|生|家|者|工|长|医生|护士|老板|司机|程序员|经理|学生|老师)|"
    r"有(?:一|两|二|三|四|五|\d|个|只|条|辆|套|台)|养了|会说|在学|刚(?:买|换|开始|加入|搬)|买了|换了|加入了|辞职|退休|结婚|离婚|怀孕|怀了|"
    r"今年\d+岁|\d+岁)|"
    r"我(?:的|家)(?:.{1,8})(?:是|叫|在|有|住|喜欢|今年|生日)|我(?:老婆|老公|妻子|丈夫|儿子|女儿|爸|妈|父亲|母亲|孩子|男朋友|女朋友|"
    r"哥|姐|弟|妹|朋友|同事|老板|领导|猫|狗)(?:.{0,6})(?:是|叫|在|住|有|喜欢|今年|下个月|明天)"
)
_ZH_DECISION = re.compile(
    r"(?:我|我们)(?:已经)?(?:决定|定了|选了|选择了|打定主意|商量好了|说好了)|就(?:用|选|定|买|订|去)(?:.{1,20})(?:吧|了)[。！!]?$|就这么定了|最后(?:定|选)了"
)
_ZH_COMMITMENT = re.compile(
    r"(?:我|我们)[^，。！？]{0,10}?(?<![觉记懂晓值获显说听])(?:要|得|必须|需要|打算|准备|计划|答应|约了|会去|要去)"
    r"(?!的|你|您|好|一个|一份|一张|[^，。！？]{0,8}(?:版|形式|格式|例子|答案|解释))"
)
# A plan or promise kept without a time; 要 / 得 / 需要 alone ("我要中文版的") are requests.
_ZH_PROMISE = re.compile(r"(?:必须|打算|计划|答应|约了)")
_ZH_STATE = re.compile(
    r"我(?:这周|这个星期|这几天|这段时间|这阵子|最近|目前|现在|今天|这个月)都?"
    r"(?:在|正在|住|待在|呆在|请假|休假|出差|加班|值班|吃素|戒|不喝|不吃)"
)
# An appointment with a time ("我周一早上七点的飞机"), a plan with a future time ("我们明年春天结婚").
_ZH_APPOINTMENT = re.compile(
    r"(?:我|我们)[^，。！？]{0,15}?(?:的(?:飞机|航班|火车|高铁|动车|船)|面试|考试|复诊|体检|预约|手术|开会|会议)"
)
_ZH_PLAN = re.compile(
    r"(?:我|我们)(?:明年|下个月|下周|下星期|明天|后天|月底|年底|过几天|过两天)[^，。！？]{0,6}?"
    r"(?:结婚|搬家|搬到|搬去|出发|回国|出国|入职|开学|动手术|飞)"
)

_HARD_DROP_ZH = re.compile(
    r"^(?:我(?:想|要)(?:问|请教|知道|了解)|我有(?:个|一个)?问题|我觉得(?:挺|还|很)?(?:好|不错|有道理))"
)
_EN_OBLIGATION = re.compile(r"\b(?:need|have|must|promised)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A sentence's verdict: its rule and category (None: not worth keeping)."""

    rule: str | None
    category: str | None
    content: str
    said: str | None = None


_DROP = Verdict(None, None, "")


def sentences(text: str) -> list[str]:
    """A message cut into sentences (English and Chinese end marks, line breaks)."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def judge_sentence(sentence: str) -> Verdict:
    """The rules over one sentence of the user's."""
    if _CJK.search(sentence):
        return _judge_zh(sentence)
    return _judge_en(sentence)


def _judge_en(sentence: str) -> Verdict:
    words = sentence.split()
    explicit = _EN_EXPLICIT.match(sentence)
    if explicit and len(explicit.group("rest").split()) >= 2:
        rest = explicit.group("rest").strip()
        inner = _en_category(rest)
        return Verdict("explicit", inner[0] if inner else "fact", _capitalise(rest), said=sentence)
    if _EN_REMIND.match(sentence) and len(words) >= 4:
        return Verdict("commitment", "task", sentence)
    if len(words) < _MIN_WORDS or sentence.rstrip().endswith("?") or _EN_QUESTION_START.match(sentence):
        return _DROP
    if _EN_CHITCHAT.match(sentence) and len(words) < 6:
        return _DROP
    if _EN_HEDGE.search(sentence) or _EN_TASK_REQUEST.match(sentence):
        return _DROP
    found = _en_category(sentence)
    if found is None:
        return _DROP
    category, rule = found
    return Verdict(rule, category, sentence)


def _en_category(text: str) -> tuple[str, str] | None:
    """(category, rule) for an English statement, or None."""
    if _EN_NAME.search(text):
        return ("fact", "self")
    if _EN_DECISION.search(text):
        return ("fact", "decision")
    if _EN_STATE.search(text):
        return ("state", "state")
    if _EN_APPOINTMENT.search(text) and _EN_TIME.search(text):
        return ("task", "commitment")
    if _EN_PREFERENCE.search(text):
        return ("state", "state") if _EN_NOW.search(text) else ("preference", "preference")
    if _EN_FACT.search(text):
        return ("state", "state") if _en_passing(text) else ("fact", "self")
    if _EN_COMMITMENT.search(text) and (_EN_TIME.search(text) or _EN_OBLIGATION.search(text)):
        return ("task", "commitment")
    return None


def _en_passing(text: str) -> bool:
    return bool(
        _EN_NOW.search(text)
        and re.search(r"\b(?:i'?m|i am|we'?re|we are)\b", text, re.IGNORECASE)
        and not re.search(r"\b(?:moved|born|live|married)\b", text, re.IGNORECASE)
    )


def _judge_zh(sentence: str) -> Verdict:
    han = len(_CJK.findall(sentence))
    explicit = _ZH_EXPLICIT.match(sentence)
    if explicit and len(_CJK.findall(explicit.group("rest"))) >= 2:
        rest = explicit.group("rest").strip()
        inner = _zh_category(rest)
        return Verdict("explicit", inner[0] if inner else "fact", rest, said=sentence)
    if _ZH_REMIND.match(sentence) and han >= 5:
        return Verdict("commitment", "task", sentence)
    if han < _MIN_HAN or _ZH_QUESTION.search(sentence):
        return _DROP
    if _ZH_CHITCHAT.match(sentence) and han < 8:
        return _DROP
    if _ZH_HEDGE.search(sentence) or _ZH_TASK_REQUEST.match(sentence) or _HARD_DROP_ZH.match(sentence):
        return _DROP
    found = _zh_category(sentence)
    if found is None:
        return _DROP
    category, rule = found
    return Verdict(rule, category, sentence)


def _zh_category(text: str) -> tuple[str, str] | None:
    if _ZH_NAME.search(text):
        return ("fact", "self")
    if _ZH_DECISION.search(text):
        return ("fact", "decision")
    if _ZH_STATE.search(text):
        return ("state", "state")
    if _ZH_PLAN.search(text) or (_ZH_APPOINTMENT.search(text) and _ZH_TIME.search(text)):
        return ("task", "commitment")
    if _ZH_PREFERENCE.search(text):
        return ("state", "state") if _zh_passing(text) else ("preference", "preference")
    if _ZH_FACT.search(text):
        return ("state", "state") if _zh_passing(text) else ("fact", "self")
    if _ZH_COMMITMENT.search(text) and (_ZH_TIME.search(text) or _ZH_PROMISE.search(text)):
        return ("task", "commitment")
    return None


def _zh_passing(text: str) -> bool:
    return bool(re.search(r"(?:这周|这个星期|本周|这几天|这段时间|今天|今晚|暂时|这个月|这学期|最近在|目前在)", text))


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def extract(role: Role, content: str, at: datetime) -> list[Candidate]:
    """The candidates of one message: its sentences the rules keep (only a user's)."""
    if role is not Role.USER:
        return []
    found: list[Candidate] = []
    for sentence in sentences(content):
        verdict = judge_sentence(sentence)
        if verdict.rule is not None and verdict.category is not None:
            found.append(Candidate(verdict.content, verdict.category, verdict.rule, at, verdict.said))
    return found


def extract_many(messages: Sequence[tuple[Role, str, datetime]]) -> list[Candidate]:
    return [candidate for role, content, at in messages for candidate in extract(role, content, at)]
