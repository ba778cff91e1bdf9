"""The conflict detector (engine/conflicts.py): rules, and its measured quality on the labelled pairs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.chatlogs import load_labels
from benchmarks.conflicts import load, predict, scores
from engine.conflicts import Judgement, Statement, Verdict, claims, continued, detect, judge, says_a_stay, slots_of

ROOT = Path(__file__).resolve().parents[2]


def verdict(old: str, new: str, **keys: str) -> Verdict:
    return judge(Statement(new, keys.get("new_key")), Statement(old, keys.get("old_key"))).verdict


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I like coffee", "I quit coffee"),
        ("我喜欢蓝色", "把主题改成黑色"),
        ("I live in Berlin", "I moved to Lisbon"),
        ("我喜欢喝咖啡", "我最近戒咖啡了"),
        ("User works at Google", "User left Google and joined Stripe"),
    ],
)
def test_the_examples_of_the_design_are_replacements(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


def test_a_flat_negation_without_a_change_marker_contradicts() -> None:
    assert verdict("I like coffee", "I don't like coffee") is Verdict.CONTRADICT
    assert verdict("用户对花生过敏", "用户对花生不过敏") is Verdict.CONTRADICT


def test_attributes_that_never_change_contradict_instead_of_replacing() -> None:
    assert verdict("User's birthday is March 3", "User's birthday is May 5") is Verdict.CONTRADICT
    assert verdict("User's timezone is UTC+1", "User's timezone is UTC+8") is Verdict.REPLACE


def test_many_valued_likes_do_not_clash() -> None:
    assert verdict("I like coffee", "I like tea") is Verdict.UNRELATED
    assert verdict("我喜欢咖啡", "我喜欢茶") is Verdict.UNRELATED


def test_claims_about_other_people_are_another_subject() -> None:
    assert verdict("Alice lives in London", "Bob lives in Paris") is Verdict.UNRELATED
    assert verdict("用户住在上海", "用户的父母住在南京") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "张伟住在上海"),
        ("用户住在杭州", "客户住在上海"),
        ("我住在杭州西湖区", "我妈妈住在成都"),
        ("我住在杭州西湖区", "我女儿住在学校宿舍"),
        ("我住在杭州", "我哥住在上海"),
        ("我住在杭州西湖区", "我老家在四川成都"),
        ("我住在杭州", "这次旅行住在三亚的民宿"),
        ("我叫李明，今年32岁", "我养了一只橘猫，名字叫橙子"),
        ("我叫李明", "我家狗名字叫旺财"),
        ("我叫李明", "我同事叫我小李"),
        ("我喜欢蓝色", "张伟不喜欢蓝色"),
        ("我住在杭州", "张伟毕业后住在上海"),
        ("我住在杭州", "张伟结婚以后搬到上海了"),
        ("我住在杭州", "我朋友毕业后住在上海"),
        ("我住在杭州", "我女儿上大学后住在学校宿舍"),
        ("我住在杭州", "我妈妈来了以后住在我家"),
    ],
)
def test_a_chinese_claim_about_someone_the_holder_pattern_does_not_know_is_theirs(old: str, new: str) -> None:
    # Names, relatives written without 的, a hometown, a pet: before, the words in front
    # of the verb were skipped and the claim was the user's, so "张伟住在上海" superseded
    # "我住在杭州" and a cat's name the user's own.
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    "new",
    [
        "我和你说过我住在上海",
        "我跟你说过我住在上海",
        "我告诉过你我住在上海",
        "我说过我住在上海",
        "我跟着公司搬到了上海",
        "我随公司搬到上海了",
    ],
)
def test_a_chinese_home_after_i_told_you_or_with_the_company_is_the_holders(new: str) -> None:
    # The words before the verb ("和你说过我", "跟着公司") read as someone else, whose home it
    # was: "user的和你说过我" lives in Shanghai, and the user's Beijing stayed current.
    assert verdict("我住在北京", new) is Verdict.REPLACE
    # Replaced in turn whole: the company the holder moved with is no one sharing the home.
    assert verdict(new, "我搬到杭州了") is Verdict.REPLACE
    # Someone else's home, a denial, a question: still not the holder's.
    assert verdict("我住在北京", "我和你说过我妈住在上海") is Verdict.UNRELATED
    assert verdict("我住在北京", "我没和你说过我住在上海") is Verdict.UNRELATED
    assert verdict("我住在北京", "我和你说过我住在上海吗") is Verdict.UNRELATED
    assert verdict("我住在北京", "他和你说过他住在上海") is Verdict.UNRELATED


def test_adverbials_before_a_chinese_verb_keep_the_holder() -> None:
    assert verdict("我住在杭州", "我目前住在上海，上个月搬过去的") is Verdict.REPLACE
    assert verdict("我叫小明", "以后请叫我明明") is Verdict.REPLACE
    assert verdict("用户每周打两次羽毛球", "用户膝盖受伤后不打羽毛球了") is Verdict.REPLACE
    assert verdict("我住在杭州", "我毕业后搬到上海了") is Verdict.REPLACE
    assert verdict("我住在杭州", "我结婚以后搬到上海了") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "我们搬到上海了"),
        ("我住在杭州", "我们家搬到上海了"),
        ("我住在杭州", "我们一家现在住在上海"),
        ("我住在杭州", "我家搬到上海了"),
        ("我住在杭州", "我今年三月搬到上海了"),
        ("我住在杭州", "我前年搬到了上海"),
        ("我住在杭州", "我上周搬到上海了"),
        ("我住在杭州", "我现在一个人住在上海"),
        ("我住在杭州", "我和老婆一起搬到上海了"),
        ("我喜欢喝咖啡", "我从上个月开始戒咖啡"),
    ],
)
def test_a_chinese_claim_of_the_users_household_or_dated_is_still_theirs(old: str, new: str) -> None:
    # Superseded before the words in front of the verb were read; "我们", a date, "一个人",
    # "和老婆一起" name no one else.
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我喜欢吃冰淇淋", "我超级喜欢吃冰淇淋"),
        ("我喜欢猫", "我真的很喜欢猫"),
        ("我喜欢猫", "我挺喜欢猫"),
        ("我喜欢猫", "我比较喜欢猫"),
        ("我喜欢吃冰淇淋", "我今天早上吃了冰淇淋"),
        ("我喜欢吃火锅", "我昨天晚上吃了火锅"),
        ("我喜欢吃火锅", "我今晚吃火锅"),
    ],
)
def test_an_intensifier_or_a_day_before_a_chinese_verb_keeps_the_holder(old: str, new: str) -> None:
    # Read as someone's name ("user的超级") since eacd6c5.
    assert verdict(old, new) is Verdict.DUPLICATE


def test_a_change_on_a_day_is_the_users_but_a_stay_or_a_skip_that_day_is_not() -> None:
    assert verdict("我住在杭州", "我今天搬到上海了") is Verdict.REPLACE
    assert verdict("我喜欢喝咖啡", "我昨天开始戒咖啡") is Verdict.REPLACE
    # Where the user sleeps one night is no home; one day without coffee is no change of taste.
    assert verdict("我住在杭州", "我今天住在酒店") is Verdict.UNRELATED
    assert verdict("我住在杭州", "我昨天住在朋友家") is Verdict.UNRELATED
    assert verdict("我住在杭州", "今天我住在酒店") is Verdict.UNRELATED
    assert verdict("我喜欢喝咖啡", "我今天不喝咖啡了") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在上海", "去年我住在北京"),
        ("我住在上海", "我去年住在北京"),
        ("我住在杭州", "我上个月住在朋友家"),
        ("我住在杭州", "我这周住在朋友家"),
        ("我住在杭州", "我最近三天住在酒店"),
        # "一起" is no "起" (since): a20500a read these as homes since the date.
        ("我住在杭州", "去年我和老婆一起住在北京"),
        ("我住在杭州", "去年我们一起住在北京"),
        # Where the user worked at a date is no employer now either.
        ("我在腾讯工作", "去年我在阿里工作"),
        ("我在腾讯工作", "我上个月在阿里上班"),
    ],
)
def test_where_the_user_lived_or_worked_at_a_date_is_not_their_home_or_employer(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize("new", ["我从去年开始住在上海", "我2020年起住在上海", "我去年搬到上海了"])
def test_a_home_since_a_date_or_a_move_at_one_is_the_users(new: str) -> None:
    assert verdict("我住在杭州", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我在阿里工作", "我在家工作"),
        ("我在阿里工作", "我现在在家里上班"),
        ("我在阿里工作", "我在家远程工作"),
        ("我在阿里工作", "我在公司上班"),
        ("I work at Google", "I work at home"),
        ("I work at Google", "I work at home for now"),
        ("I work at Google", "I started working at home"),
        ("I work at Google", "I work from home"),
        ("I work at Google", "I'm working from home today"),
        ("I work at Google", "I work at the office"),
    ],
)
def test_where_the_user_works_is_not_whom_they_work_for(old: str, new: str) -> None:
    # Home, the office, 家, 公司 name no employer; read as one they replaced the real one.
    assert verdict(old, new) is Verdict.UNRELATED


def test_an_employer_whose_name_starts_like_a_workplace_is_still_one() -> None:
    assert verdict("我在阿里工作", "我在家乐福工作") is Verdict.REPLACE
    assert verdict("I work at Google", "I work at Home Depot") is Verdict.REPLACE


def test_words_after_we_that_name_something_else_are_not_the_users() -> None:
    assert verdict("我住在杭州", "我们公司搬到上海了") is Verdict.UNRELATED
    assert verdict("我住在杭州", "我家人住在上海") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "new",
    ["王芳下周去上海出差，住在外滩附近", "王芳去上海出差，住在外滩附近", "我朋友来杭州玩，住在西湖边"],
)
def test_a_clause_without_a_subject_after_someone_elses_is_not_the_users(new: str) -> None:
    # The second clause has no subject of its own; the first names someone else, so the
    # hotel is theirs, not the user's home.
    assert verdict("我住在杭州", new) is Verdict.UNRELATED


@pytest.mark.parametrize("new", ["王芳来了，她住在上海", "我姐姐来了。她住在上海", "我朋友来杭州玩，他住在西湖边"])
def test_he_or_she_after_a_clause_that_names_someone_else_is_them(new: str) -> None:
    # Outside a speaker's line "他"/"她" is the user ("用户住在杭州。她在阿里工作"), but
    # not where the clause before named someone: there it is that someone.
    assert verdict("我住在杭州", new) is Verdict.UNRELATED
    # (Where the newer text says nothing of the employer, the older one says more and is
    # not replaced whole: see test_a_replacement_of_one_claim_leaves_the_others_in_recall.)
    assert verdict("用户住在杭州。她在阿里工作", "用户住在上海。她在阿里工作") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "张伟是我同事，他住在上海"),
        ("我住在杭州", "张伟是我同事。现在住在上海"),
        ("我住在杭州", "张伟是我的朋友，住在上海"),
        ("I live in Hangzhou", "Tom is my colleague. He lives in Shanghai"),
        ("I live in Hangzhou", "Tom is my colleague and he lives in Shanghai"),
        ("I live in Hangzhou", "Tom is my colleague. His home is in Shanghai"),
    ],
)
def test_the_clauses_after_x_is_my_colleague_are_about_x(old: str, new: str) -> None:
    # "X是我同事" / "X is my colleague" introduces X: the next 他, "he" or clause without a
    # subject is X's, not the user's.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("User lives in Rome. She works at Acme", "User lives in Paris. She works at Acme") is (
        Verdict.REPLACE
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user's husband works at Google", "The user's husband is a chef. She works at Acme"),
        ("The user's wife works at Google", "The user's wife is a nurse. He works at Acme"),
        ("The user's wife lives in Rome", "The user's wife works at Acme. His home is in Paris"),
    ],
)
def test_he_or_she_is_not_a_relative_of_the_other_sex(old: str, new: str) -> None:
    # Since 89a50e2 "she" is whom the clause before was about; a husband is no "she", so the
    # clause says nothing about him (nor, unsure, about the user).
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("The user's sister works at Google", "The user's sister is a nurse. She works at Acme") is (
        Verdict.REPLACE
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "My doctor said I should rest. She lives in Paris"),
        ("I live in Berlin", "I told my sister I moved. She lives in Paris"),
        ("I work at Google", "I live in Rome. He works at Acme"),
        ("I live in Hangzhou", "I have a colleague named Tom. He lives in Shanghai"),
        ("我住在杭州", "我认识张伟，他住在上海"),
        ("我住在杭州", "我有个同事叫张伟，他住在上海"),
        ("我在腾讯工作", "我老公是厨师，她在阿里工作"),
    ],
)
def test_he_or_she_in_a_text_in_the_first_person_is_never_the_speaker(old: str, new: str) -> None:
    # Who says "I" calls themself "I", not "he": where the clause before was about the speaker,
    # "he"/"她" is someone the rules did not read, and nothing is read.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("User lives in Rome. She works at Acme", "User lives in Paris. She works at Acme") is (
        Verdict.REPLACE
    )
    assert verdict("我住在杭州", "我姐姐来了。她住在上海") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "new",
    [
        "Tom works at home. He lives in Shanghai",
        "Tom works from the office. He lives in Shanghai",
        "The user's wife works at home. She lives in Shanghai",
    ],
)
def test_he_or_she_after_a_clause_that_names_someone_but_reads_nothing_is_them(new: str) -> None:
    # "Tom works at home" reads no employer (cd0d2fa), but it is still about Tom.
    assert verdict("User lives in Hangzhou", new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Rome", "I met Tom. His wife works at home and lives in Shanghai"),
        ("I live in Rome", "I met Tom. He works at home and lives in Shanghai"),
        ("I live in Rome", "User: He is tired and lives in Shanghai"),
        ("The user lives in Rome", "The user's doctor works at home. She lives in Paris"),
        ("我认识李明，他人很好，他住在北京", "我认识张伟，他人很好，他住在上海"),
        ("I met Bob. He is kind and lives in Paris", "I met Tom. He is nice and lives in Shanghai"),
    ],
)
def test_a_clause_about_someone_unread_leaves_the_clauses_after_it_to_no_one(old: str, new: str) -> None:
    # "he" that is not the user, "his wife", "the user's doctor": someone the rules cannot
    # tell apart from anyone else's "he". The clause without a subject after it is theirs,
    # neither the user's nor the same person as another text's "he".
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("The user lives in Rome", "The user works at home. She lives in Paris") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "我哥哥是厨师，住在上海"),
        ("用户住在杭州", "用户同事是上海人，住在浦东"),
        ("I live in Rome", "My neighbour is a doctor and lives in Paris"),
        ("The user lives in Rome", "The user's roommate is a doctor and lives in Paris"),
    ],
)
def test_a_clause_without_a_subject_after_my_relative_is_x_is_the_relatives(old: str, new: str) -> None:
    # "我哥哥是厨师，住在上海": the brother lives in Shanghai, as after "我的哥哥是厨师".
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("我住在杭州", "我哥哥来了，我搬到上海了") is Verdict.REPLACE


@pytest.mark.parametrize("new", ["现在我住在上海", "最近我搬到上海了", "去年我们搬到上海了", "现在用户住在上海"])
def test_the_user_after_an_adverbial_that_opens_the_clause_is_still_the_holder(new: str) -> None:
    # Since eacd6c5 the words before the verb ("现在我") were read as someone else's name.
    assert verdict("我住在杭州", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "我下周去上海出差，住在外滩附近",
        "我上周去北京出差了，住在朝阳区的酒店",
        "我去三亚旅游，住在海边",
        "下周去上海出差，住在外滩附近",
        "明天去上海开会，住在酒店",
        "我在出差。我住在外滩附近",
        "我正在出差！我住在外滩附近",
        "我在旅游。住在西湖边",
        "我这几天在出差。我现在住在外滩附近",
        "我去上海出差了。我住在外滩附近",
        "我在度假。我住三亚",
    ],
)
def test_a_clause_without_a_subject_after_the_users_trip_is_a_stay_not_a_home(new: str) -> None:
    # Past its sentence a trip was forgotten: "我在出差。我住在外滩附近" replaced the home.
    assert verdict("我住在杭州", new) is Verdict.UNRELATED
    assert verdict("我住在杭州", "我在出差。我搬到上海了") is Verdict.REPLACE
    assert verdict("我住在杭州", "我喜欢旅游。我住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我下周去上海出差，住在外滩附近", "我下周去北京出差，住在王府井"),
        ("下周去上海出差，住在外滩附近", "下周去北京出差，住在王府井"),
        ("王芳下周去上海出差，住在外滩附近", "王芳去北京出差，住在王府井"),
    ],
)
def test_a_stay_on_one_trip_does_not_replace_the_stay_on_another(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict(old, old) is Verdict.DUPLICATE


def test_a_clause_without_a_subject_after_the_users_own_is_still_the_users() -> None:
    assert verdict("我住在杭州", "我上个月搬家了，现在住在上海") is Verdict.REPLACE
    assert verdict("我住在北京", "我搬到上海了") is Verdict.REPLACE
    assert verdict("我喜欢喝咖啡", "我最近戒咖啡了") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "My doctor is Dr. Lee and lives in Paris"),
        ("I live in Berlin", "My doctor is Lee and lives in Paris"),
        ("I live in Berlin", "My dentist is Dr. Lee, lives in Paris"),
        ("The user lives in Berlin", "The user's doctor is Dr. Lee. She lives in Paris"),
        ("The user lives in Berlin", "The user's favourite singer is Adele. She lives in London"),
        ("我住在杭州", "我的医生是李医生，住在上海"),
        ("用户住在杭州", "用户的医生是李医生，她住在上海"),
    ],
)
def test_the_clauses_after_my_x_is_y_are_about_the_x(old: str, new: str) -> None:
    # "My doctor is Dr. Lee" is read as the user's attribute; the clause after it was read
    # as the user's too, though its subject is the doctor.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("The user lives in Berlin", "The user's name is Anna. She lives in Paris") is Verdict.REPLACE
    assert verdict("用户住在杭州", "用户的名字是小红，她住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user lives in Berlin", "The user met a friend. He lives in Paris"),
        ("The user lives in Berlin", "The user talked to her doctor. She lives in Paris"),
        ("The user lives in Berlin", "The user met Tom. He lives in Paris"),
        ("The user lives in Berlin", "The user met a friend and he lives in Paris"),
        ("The user lives in Berlin", "The user visited her mother. She lives in Paris"),
        ("The user lives in Berlin", "The user visited Tom. His home is in Paris"),
        ("The user lives in Berlin", "The user had dinner with Tom. He lives in Paris"),
        ("The user lives in Berlin", "The user lives with her sister. She lives in Paris"),
        ("The user lives in Berlin", "The user is married to Tom. He lives in Paris"),
        ("The user lives in Berlin", "The user has a friend. She lives in Paris"),
        ("The user lives in Berlin", "There was a guy. He lives in Paris"),
        ("The user lives in Berlin", "The user met her parents. They live in Paris"),
        ("The user lives in Berlin", "The user's parents are retired. They live in Paris"),
        ("The user works at Google", "The user lives in Paris with her husband. He works at Acme"),
        ("用户住在杭州", "用户认识了一个朋友，他住在上海"),
        ("用户住在杭州", "用户见了张伟，他住在上海"),
        ("用户住在杭州", "用户有个朋友，住在上海"),
    ],
)
def test_he_she_they_after_a_clause_that_names_someone_besides_its_subject_are_no_one(old: str, new: str) -> None:
    # The person in the object ("a friend", "her doctor", "Tom" after "met") may be whom the
    # pronoun names; it was always read as the clause's subject, the user.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("The user lives in Berlin", "The user is a nurse. She lives in Paris") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user works at home. She lives in Paris") is Verdict.REPLACE
    assert verdict("用户住在杭州", "用户是两个孩子的妈妈，她住在上海") is Verdict.REPLACE


@pytest.mark.parametrize("new", ["我有两个孩子，住在上海", "我有三个女儿，现在住在上海", "用户有两个儿子，搬到上海了"])
def test_a_clause_without_a_subject_after_the_users_children_is_still_the_users(new: str) -> None:
    # "有两个孩子" named people besides the user, so "住在上海" went to no one: a move missed.
    assert verdict("我住在杭州", new) is Verdict.REPLACE
    # Theirs where it may be: one child ("有个儿子，住在…" says where he lives), friends, a
    # clause about all of them ("都住在…"), a 他们.
    for theirs in (
        "我有个儿子，住在上海",
        "我有两个朋友，住在上海",
        "我有两个孩子，都住在上海",
        "我有两个娃，都住在上海",
    ):
        assert verdict("我住在杭州", theirs) is Verdict.UNRELATED, theirs
    assert verdict("我住在杭州", "我有两个孩子，他们住在上海") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "她有两个孩子，住在上海"),
        ("我住在杭州", "他有三个女儿，现在住在上海"),
        ("我在杭州工作", "我有两个孩子，在上海工作"),
        ("我在阿里巴巴工作", "用户有两个儿子，在腾讯上班"),
    ],
)
def test_a_clause_after_children_that_are_not_named_as_the_users_or_a_job_after_them_is_no_ones(
    old: str, new: str
) -> None:
    # After "她有两个孩子" the children were the user's (a 她 at the start is the user), and
    # so was "住在上海"; a job after the user's children ("在上海工作") may be a grown child's.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("我住在杭州", "我有两个孩子，住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "我有两个孩子，现在都住在上海"),
        ("我住在杭州", "用户有三个孩子，目前都搬到上海了"),
        ("我在阿里巴巴工作", "我有两个孩子，现在都在上海工作"),
        ("我住在杭州", "我有两个孩子，都上大学了，住在上海"),
        ("我住在杭州", "我有两个女儿，都很可爱，住在上海"),
        ("用户住在杭州", "用户有两个孩子，住在上海的学校"),
        ("我住在杭州", "我有两个孩子，在上海上学，住在学校"),
        ("我住在杭州", "我有两个儿子，平时住在上海的奶奶家"),
        ("我住在杭州", "我有两个孩子，也住在上海"),
        ("我住在杭州", "我有两个孩子，平时住校"),
        ("我住在杭州", "我有两个孩子，一个八岁，住在上海"),
    ],
)
def test_a_clause_after_the_users_children_that_may_be_about_them_is_no_ones(old: str, new: str) -> None:
    # Read as the user's: a 都 after an adverbial ("现在都"), a clause after one about all
    # of them ("都上大学了，…"), their school, a grandparent's home, "也" (they too, or the
    # user too) all replaced the user's home or employer.
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    "new",
    [
        "The user has a nanny. She lives in Paris",
        "The user hired a babysitter. She lives in Paris",
        "The user has a new supervisor. He lives in Paris",
        "The user sees a psychiatrist. She lives in Paris",
        "The user's hubby is great. He lives in Paris",
        "The user helped Anna. She lives in Paris",
        "The user hugged Anna. She lives in Paris",
        "The user thanked Anna. She lives in Paris",
        "The user emailed Anna. She lives in Paris",
        "The user interviewed Tom. He lives in Paris",
        "The user mentioned Tom. He lives in Paris",
        "The user has a cousin named Anna. She lives in Paris",
        "The user borrowed Tom's car. He lives in Paris",
        "The user is Tom's neighbour. He lives in Paris",
    ],
)
def test_he_or_she_after_a_person_or_a_verb_for_one_the_rules_did_not_list_is_no_one(new: str) -> None:
    # f754b50 named people by two lists; these words were on neither, and the "she" was the user.
    assert verdict("The user lives in Berlin", new) is Verdict.UNRELATED
    assert verdict("The user lives in Berlin", "The user works as a writer. She lives in Paris") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user needs help. She lives in Paris") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user's name is Anna. She lives in Paris") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user lives in Berlin", "The user loves Anna. She lives in Paris"),
        ("The user lives in Berlin", "The user adores Maria. She lives in Paris"),
        ("The user lives in Berlin", "The user misses Tom, and he lives in Paris"),
        ("The user lives in Berlin", "The user is a friend of Tom. He lives in Paris"),
        ("用户住在北京", "用户喜欢张伟，他住在上海"),
        ("用户住在北京", "用户崇拜王芳，她住在上海"),
        ("用户住在北京", "用户是张伟的朋友，他住在上海"),
        ("用户住在北京", "用户是小红的同事。她住在上海"),
        ("用户住在北京", "用户爱上了张伟，他住在上海"),
        ("用户住在北京", "用户喜欢过王芳，她住在上海"),
        ("用户住在北京", "用户喜欢张伟很久了，他住在上海"),
        ("用户住在北京", "用户是张伟最好的朋友，他住在上海"),
        ("The user lives in Berlin", "The user looks up to Anna. She lives in Paris"),
        ("The user lives in Berlin", "The user is close to Anna. She lives in Paris"),
        ("The user lives in Berlin", "The user is very close to Tom. He moved to Paris"),
        ("The user lives in Berlin", "The user cares about Maria. She lives in Paris"),
        ("The user lives in Berlin", "The user is crazy about Kevin. He is based in Rome"),
        ("The user lives in Berlin", "The user is engaged to Priya. She lives in Paris"),
        ("The user lives in Berlin", "The user has feelings for Omar. He lives in Paris"),
        ("用户住在北京", "用户喜欢欧阳娜娜，她住在上海"),
        ("用户住在北京", "用户崇拜司马光，他住在上海"),
        ("用户住在北京", "用户欣赏诸葛亮，他住在上海"),
        ("用户住在北京", "用户爱上了慕容复，他住在上海"),
        ("用户住在北京", "用户喜欢Anna，她住在上海"),
        ("用户住在北京", "用户暗恋Tom，他搬到上海了"),
        ("用户住在北京", "用户喜欢过Taylor Swift，她住在上海"),
        ("用户住在北京", "用户是Anna的粉丝，她住在上海"),
        ("用户住在北京", "用户想起了Anna，她住在上海"),
    ],
)
def test_he_or_she_after_a_name_the_user_is_fond_of_or_is_a_friend_of_is_no_one(old: str, new: str) -> None:
    # "loves Anna" names someone as "met Anna" does; only the capital tells it from "loves
    # coffee", and a surname from "喜欢咖啡". "是张伟的朋友": the 他 after it may be 张伟.
    # Superseded before: "looks up to", "is close to" … were no verbs of fondness, a
    # surname of two characters (欧阳, 司马) no surname, and a Latin name in Chinese text
    # no name.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("The user lives in Berlin", "The user loves coffee. She lives in Paris") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user loves Lisbon. She lives in Paris") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user loves New York. She moved to Lisbon") is Verdict.REPLACE
    assert verdict("用户住在北京", "用户喜欢咖啡，她住在上海") is Verdict.REPLACE
    assert verdict("用户住在北京", "用户是公司的老板，她住在上海") is Verdict.REPLACE
    assert verdict("用户住在北京", "用户是两个孩子的妈妈，她住在上海") is Verdict.REPLACE
    assert verdict("用户住在北京", "用户喜欢Python，她住在上海") is Verdict.REPLACE
    assert verdict("用户住在北京", "用户换了iPhone，她住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "The user loves Italian food. She moved to Lisbon",
        "The user likes Korean dramas. She moved to Lisbon",
        "The user adores French wine. He now lives in Lisbon",
        "The user loves Japanese. She moved to Lisbon",
    ],
)
def test_a_nationality_after_a_verb_of_fondness_is_no_ones_name(new: str) -> None:
    # "Italian" was read as a name the user is fond of, so "she" was someone else.
    assert verdict("The user lives in Berlin", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "The user is a fan of Italian singer Laura. She lives in Rome",
        "The user admires French designer Coco. She moved to Rome",
        "The user loves British rapper Stormzy. He lives in Rome",
        "The user likes Korean YouTuber Jisoo. She moved to Rome",
    ],
)
def test_a_nationality_before_a_name_is_someone_a_she_after_it_may_be(new: str) -> None:
    # "Italian" is no name, but "Italian singer Laura" names someone: "she" may be Laura,
    # and was read as the user, whose home she replaced.
    assert verdict("The user lives in Berlin", new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("用户住在北京", "用户喜欢张伟，住在上海"),
        ("用户住在北京", "用户喜欢夏天，现在住在上海"),
        ("用户住在北京", "用户是张伟的朋友，住在上海"),
        ("我住在北京", "我喜欢李白的诗。最近搬到了上海"),
        ("用户在腾讯工作", "用户崇拜王芳，在阿里巴巴工作"),
    ],
)
def test_a_clause_with_no_subject_after_a_name_the_user_is_fond_of_is_still_the_users(old: str, new: str) -> None:
    # Only a 他/她 after "喜欢张伟" may be 张伟; a clause with no subject goes on with the user.
    assert verdict(old, new) is Verdict.REPLACE
    assert verdict("用户住在北京", "用户喜欢张伟，他住在上海，在腾讯工作") is Verdict.UNRELATED
    assert verdict("用户住在北京", "用户认识了张伟，住在上海") is Verdict.UNRELATED
    # "住在上海的那个": the one who lives there, 张伟, not a predicate of the user.
    assert verdict("用户住在北京", "用户喜欢张伟，住在上海的那个") is Verdict.UNRELATED
    assert verdict("用户住在北京", "住在上海的那位") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I sent my son to college and now lives in Paris"),
        ("I live in Berlin", "We sold the house and lives in Paris"),
        ("I work at Google", "I met Tom and works at Acme"),
    ],
)
def test_a_verb_joined_to_i_or_we_that_does_not_agree_with_them_is_not_theirs(old: str, new: str) -> None:
    # "I … and now lives in Paris": "lives" is not what "I" does, so the son does.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I sent my son to college and now live in Paris") is Verdict.REPLACE
    assert verdict("I live in Berlin", "The user sent her son to college and now lives in Paris") is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "用户有个保姆，她住在上海",
        "用户有个师傅，他住在上海",
        "用户有个网友，他住在上海",
        "用户有个闺蜜，她住在上海",
        "用户的先生是医生。他住在上海",
        "用户有一位医生，他住在上海",
        "用户帮了张伟，他住在上海",
        "用户想念张伟，他住在上海",
        "用户照顾张伟，他住在上海",
        "用户联系了张伟，他住在上海",
        "用户雇了张伟，他住在上海",
    ],
)
def test_ta_after_a_person_or_a_verb_for_one_the_rules_did_not_list_is_no_one(new: str) -> None:
    assert verdict("用户住在杭州", new) is Verdict.UNRELATED
    assert verdict("用户住在杭州", "用户是一名护士，她住在上海") is Verdict.REPLACE
    assert verdict("用户住在杭州", "用户在医院当护士，住在上海") is Verdict.REPLACE
    assert verdict("用户住在杭州", "用户在帮忙，她住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I met Tom and moved to Paris"),
        ("I live in Berlin", "I visited my mom and moved to Paris"),
        ("I live in Berlin", "I have two kids and live in Paris"),
        ("I live in Berlin", "I work with children and live in Paris"),
        ("The user lives in Berlin", "The user married Tom and moved to Paris"),
        ("The user lives in Berlin", "The user works as a nurse and lives in Paris"),
        ("The user lives in Berlin", "The user met a friend, and lives in Paris now"),
    ],
)
def test_a_verb_joined_by_and_after_a_clause_that_names_someone_else_is_still_its_subjects(old: str, new: str) -> None:
    # "I met Tom and moved to Paris": the subject of "moved" is "I", whoever "met" names.
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "The user met a friend and he lives in Paris",
        "The user met a friend. Lives in Paris",
        "Met Tom at the conference, lives in Paris",
        "I have a sister who works at Acme and lives in Paris",
        "The user has a friend that is a chef and lives in Paris",
        "I have a friend working in Rome and living in Paris",
        "Tom visited me and moved to Paris",
        "Tom met the user and lives in Paris",
    ],
)
def test_a_clause_joined_to_one_about_someone_else_is_not_the_users(new: str) -> None:
    # A "he", a relative clause, a participle, or a subject whose verb the rules do not
    # know ("Tom visited …"): what follows may be the other person's.
    assert verdict("I live in Berlin", new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在杭州", "我今天在上海，住在酒店"),
        ("我住在杭州", "我今天在上海，住在宾馆"),
        ("我住在杭州", "我今天在上海，住酒店"),
        ("我住在杭州", "我今天在上海，住在朋友家"),
        ("我住在杭州", "我明天在上海，住在朋友家"),
        ("我住在杭州", "下周我在北京，住在朋友家"),
        ("我住在杭州", "我今天吃了火锅，住在朋友家"),
        ("我住在杭州", "我住在酒店"),
        ("我住在杭州", "我住在上海的民宿"),
        ("我住在杭州", "我住在朋友家三天"),
        ("I live in Berlin", "I stay in a hotel in Shanghai this week"),
        ("I live in Berlin", "I stay in a hotel in Shanghai"),
        ("I live in Berlin", "I live in a hotel in Shanghai"),
        ("I live in Berlin", "I stay in Shanghai tonight"),
        ("I live in Berlin", "I stay in Shanghai for the weekend"),
        ("I live in Berlin", "I live in Shanghai for a few days"),
        ("I live in Berlin", "I'm in Shanghai this week and stay in Pudong"),
        ("The user lives in Berlin", "The user lives in an Airbnb in Paris"),
    ],
)
def test_a_stay_in_a_hotel_for_a_while_or_on_a_day_is_not_a_home(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I stay at the Hilton in Paris"),
        ("I live in Berlin", "I stay in the Hilton"),
        ("I live in Berlin", "I live at the Marriott in Paris"),
        ("I live in Berlin", "I stay at an inn in Paris"),
        ("我住在杭州", "我住在朋友家"),
        ("我住在杭州", "我住在上海的朋友家"),
        ("我住在杭州", "我住在张伟家里"),
        ("我住在杭州", "我们一家在度假。我们住在昆明"),
    ],
)
def test_a_hotel_by_its_name_someones_home_or_a_family_holiday_is_not_a_home(old: str, new: str) -> None:
    # "the Hilton" was no hotel, "朋友家" a place like any, and "一家在度假" read as a home
    # (家在 "度假") that hid the holiday from "我们住在昆明".
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("我住在杭州", "我搬到朋友家了") is Verdict.REPLACE
    assert verdict("我住在杭州", "我家在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在上海", "我住在家里"),
        ("我住在上海", "我住在老家"),
        ("我住在上海", "我现在住在家里"),
        ("我住在上海", "我住在自己家"),
        ("我住在上海", "我搬到郊区了"),
        ("我住在上海", "我住在学校宿舍"),
        ("I live in Berlin", "I live at home"),
        ("I live in Berlin", "I live in my hometown"),
        ("I live in Berlin", "I live in a small apartment"),
        ("I live in Berlin", "I moved to a new apartment"),
        ("I live in Berlin", "I live in the suburbs now"),
        ("I live in Berlin", "I live in the countryside"),
        ("I live in Berlin", "I live in a house with a garden"),
        ("I live in Berlin", "I live in a nice flat near the park"),
        ("I live in Berlin", "I moved to a bigger apartment close to the station"),
    ],
)
def test_a_home_that_names_no_place_neither_replaces_a_city_nor_is_replaced(old: str, new: str) -> None:
    # "家里", "老家", "my hometown", "a new apartment" were read as a city of their own, so
    # "我住在家里" superseded "我住在上海": whether the holder moved, and where, it does not say.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict(new, old) is Verdict.UNRELATED
    # A named place beside the unnamed one is still a home.
    assert verdict(old, "I moved to a flat in Paris" if old.isascii() else "我搬到北京的郊区了") is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I live in a townhouse",
        "I live in an old farmhouse",
        "I live in a loft downtown",
        "I moved to an apartment uptown",
        "I moved to a cottage",
        "I moved to a cabin in the woods",
        "I live in a van",
        "I moved to a houseboat",
        "I moved to the other side of town",
        "我搬到新房子了",
        "我住在一个小公寓里",
        "我住在老房子里",
        "我搬到了一个更大的房子",
        "我住在自己的房子里",
        "我住在郊区的一套房子里",
        "我住在公司宿舍",
        "我住在公司附近",
        "我住在三楼",
        "我住在28楼",
        "我住在别墅",
        "我住在两居室",
        "我住在隔壁",
    ],
)
def test_more_kinds_of_dwelling_name_no_place(new: str) -> None:
    # Each read as a city of its own ("townhous", "新房 房子 新房子", "三楼"), so moving
    # within Berlin into a townhouse, or up to the third floor, hid "I live in Berlin".
    old = "I live in Berlin" if new.isascii() else "我住在北京"
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict(new, old) is Verdict.UNRELATED


@pytest.mark.parametrize(
    "new",
    ["I live on Hilton Avenue in Paris", "I live on Ibis Street in Munich", "I live in Westin Park, Paris"],
)
def test_a_street_named_like_a_hotel_chain_is_still_a_home(new: str) -> None:
    # A chain's name anywhere in the place read as lodging, so a move to "Hilton Avenue"
    # was no home at all and the old one stayed current.
    assert verdict("I live in Berlin", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I stay with my friend in Shanghai",
        "I stay with my parents in Shanghai",
        "I stay in Shanghai with Tom",
        "I'm on a trip. I stay in Shanghai",
        "I am on vacation. It is hot. I stay in Shanghai",
        "I'm travelling. I stay in Shanghai",
        "I am traveling. I'm staying in Shanghai",
        "We are travelling. We stay in Shanghai",
        "I'm visiting. I stay in Shanghai",
        "I'm visiting my aunt. I stay in Shanghai",
        "I'm backpacking. I stay in Shanghai",
        "I'm on a work trip. I stay in Shanghai",
        "I stay at my friend's place in Shanghai",
        "I'm staying at a friend's flat in Shanghai",
        "I stay at my parents' place in Shanghai",
        "I stay at Tom's place in Shanghai",
        # A move in the clause that is not the stay's own is no move of the holder's.
        "I'm on a business trip. I stay in Shanghai while they are moving the office",
        "I'm on a work trip. I stay in Shanghai while we are moving offices",
        "I'm travelling. I stay in Lisbon while my sister is moving",
    ],
)
def test_a_stay_with_someone_or_after_a_trip_in_an_earlier_sentence_is_not_a_home(new: str) -> None:
    # The trip held only within its own sentence ("I'm on a trip and stay in …").
    assert verdict("I live in Berlin", new) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I live with my friend in Shanghai") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I'm on a trip. I moved to Shanghai") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I went on a trip. I live in Shanghai") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I'm travelling. I moved to Shanghai") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I like travelling. I stay in Shanghai") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I live at my friend's place in Shanghai") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I stay in Shanghai next week"),
        ("I live in Berlin", "I stay in Shanghai on Monday"),
        ("I live in Berlin", "I stay in Shanghai on weekends"),
        ("I live in Berlin", "I stay in Shanghai for a month"),
        ("I live in Berlin", "I live in Shanghai during the summer"),
        ("I live in Berlin", "I stay in Shanghai while I travel"),
        ("I live in Berlin", "I stay in Shanghai for the conference"),
        ("I work at Google", "I work at Acme this week"),
        ("我住在杭州", "我春节回上海，住在爸妈家"),
        ("我住在杭州", "国庆我回上海，住在朋友家"),
        ("我住在杭州", "我住在朋友家一段时间"),
        ("我住在杭州", "我来上海参加婚礼，住在朋友家"),
        ("我住在杭州", "我来上海培训，住在外滩"),
        ("I live in Berlin", "I stay in Shanghai for a wedding"),
        ("I live in Berlin", "I am in Shanghai for my course and I stay in Pudong"),
    ],
)
def test_a_stay_next_week_on_a_day_for_a_month_or_a_holiday_is_not_a_home(old: str, new: str) -> None:
    # Periods 5caf314's list left out: a plan, a weekday, a month, a season, a holiday.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I moved to Paris during the summer") is Verdict.REPLACE
    assert verdict("我住在杭州", "我春节后搬到上海了") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Paris"),
        ("I live in Berlin", "I moved to Paris this week"),
        ("I live in Berlin", "I live in Paris now"),
        ("I live in Berlin", "I'm in Rome this week, and I live in Paris now"),
        ("The user lives in Berlin", "The user moved to Paris"),
        ("我住在杭州", "我搬到上海了"),
        ("我住在杭州", "现在我住在上海"),
        ("我住在杭州", "去年我住在北京，现在住在上海"),
        ("我住在杭州", "我上个月搬家了，住在上海"),
        ("我住在杭州", "我住在酒店式公寓"),
    ],
)
def test_a_move_or_a_home_now_still_replaces_beside_a_day_or_a_hotel(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "Last week I moved to Paris"),
        ("I live in Berlin", "Yesterday I moved to Paris"),
        ("I live in Berlin", "Recently I moved to Paris"),
        ("I live in Berlin", "A few weeks ago we moved to Paris"),
        ("I live in Berlin", "These days I live in Paris"),
        ("I live in Berlin", "Since last year I live in Paris"),
        ("I live in Berlin", "I met Tom and then moved to Paris"),
        ("I work at Google", "Last month I started at Acme"),
    ],
)
def test_a_move_after_when_it_happened_or_after_and_then_replaces(old: str, new: str) -> None:
    # "Last week" or "then" before the subject hid it: the clause read as one without a subject.
    assert verdict(old, new) is Verdict.REPLACE
    assert verdict("I live in Berlin", "Today I stay in Shanghai") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "Last week I met Tom. He lives in Paris") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "Last week I stayed in Paris") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "I moved to Paris for a week",
        "By the way I moved to Paris for a week",
        "Anyway I moved to Paris for a month",
        "I moved to Paris for the summer",
        "I relocated to Paris for a few months",
        "I moved to Paris for a conference",
        "I moved to Paris temporarily",
    ],
)
def test_a_move_for_a_while_is_no_new_home(said: str) -> None:
    # A stay said with "moved to": read as a home, a week in Paris hid the home in Berlin.
    assert verdict("I live in Berlin", said) is Verdict.UNRELATED
    # A move for a reason, or said when, is still a move.
    assert verdict("I live in Berlin", "I moved to Paris for work") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris this week") is Verdict.REPLACE


@pytest.mark.parametrize("said", ["我临时搬到上海", "我暂时搬到上海了", "我暂时住在上海", "我临时在上海工作"])
def test_a_temporary_move_in_chinese_is_the_users_and_no_new_home(said: str) -> None:
    # 临时/暂时 before the verb read as someone else ("user的临时" moved to Shanghai): the
    # verdict was "unrelated" only because of that holder. Read as the user's, it is a
    # stay, as "我搬到上海住一段时间" is, and the clause after it is still the user's.
    assert claims(said) == ()
    assert verdict("我住在北京", said) is Verdict.UNRELATED
    assert verdict("我在阿里工作", said) is Verdict.UNRELATED
    assert [claim.holder for claim in claims(said + "，喜欢喝茶")] == ["user"]
    # Where the user stays then is no home either: read as the user's, it hid Beijing.
    assert verdict("我住在北京", said + "，住在浦东") is Verdict.UNRELATED
    assert verdict("我住在北京", "我搬到上海住一段时间，住在浦东") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said", ["我跟着朋友搬到了上海", "我和朋友搬到了上海", "我跟朋友一起搬到了上海", "我和同事搬到了上海"]
)
def test_a_chinese_move_with_a_friend_is_the_users_move(said: str) -> None:
    # "跟着朋友" read as someone else ("user的跟着朋友" moved), as "with my wife" does not in
    # English: the move replaces the home, and who came along is more than the home.
    assert [claim.holder for claim in claims(said)] == ["user"]
    assert verdict("我住在北京", said) is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris with my friend") is Verdict.REPLACE
    assert verdict(said, "我搬到杭州了") is Verdict.CONTRADICT
    assert verdict("I moved to Paris with my friend", "I moved to Rome") is Verdict.CONTRADICT
    # A friend's own move is still not the user's.
    assert verdict("我住在北京", "我朋友搬到了上海") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "I moved to Paris for a while",
        "I moved to Paris for a little while",
        "I live in Paris for the time being",
        "I live in Paris temporarily",
        "I live in Paris for now",
        "For now, I live in Paris",
        "I moved to Paris for a year",
        "I moved to Paris for the semester",
    ],
)
def test_a_home_or_a_move_for_a_while_without_a_length_is_no_new_home(said: str) -> None:
    # "For a while", "for the time being", "temporarily" (said of "live"), "for now" and a
    # year read as a home in Paris and hid the one in Berlin, where "for a week" did not.
    assert verdict("I live in Berlin", said) is Verdict.UNRELATED
    # A move said when, for good or for a reason is still a move.
    assert verdict("I live in Berlin", "I moved to Paris in the summer") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris for good") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris a while ago") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    [
        "I live in Paris as a joke",
        "I moved to Paris as a joke",
        "I live in Paris in my dreams",
        "In my dreams, I live in Paris",
        "I live in Paris half the time",
        "I live half the time in Paris",
        "Half the time, I live in Paris",
        "I live in Paris part-time",
        "I live in Paris part of the year",
        "I live in Paris sometimes",
        "I live in Nice in the summer",
    ],
)
def test_a_home_part_of_the_time_or_not_in_earnest_is_no_new_home(said: str) -> None:
    # A second home, or none at all: the one in Berlin is still the user's.
    assert verdict("I live in Berlin", said) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Google", "I work at Acme part-time"),
        ("I work at Google", "I joined Acme for the summer"),
        ("I work at Google", "I left Google for a few months"),
        ("I work at Google", "I joined Acme. Just for two months though."),
    ],
)
def test_a_job_for_a_while_or_part_time_is_no_new_employer(old: str, new: str) -> None:
    # A second job or a leave: read as a change of employer, it hid Google.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict(old, "I joined Acme") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    [
        "I moved to Paris. Only for two weeks though.",
        "I moved to Paris, it's just for a month",
        "I moved to Paris. It's only temporary.",
        "I moved to Paris, but only temporarily",
        "I moved to Paris, but not for good",
        "我搬到上海了，只住两个星期",
        "我搬到上海了，不过只是暂时的",
        "我搬到上海了，就待一个月",
        "我搬到上海了，不会长住",
        "我搬到上海了，不过不是长期的",
        "我搬到上海一段时间",
    ],
)
def test_a_move_said_to_be_a_stay_in_a_clause_of_its_own_is_no_new_home(said: str) -> None:
    # How long the move is for, said after it, read as nothing: the move hid the home.
    old = "我住在北京" if "上海" in said else "I live in Berlin"
    assert verdict(old, said) is Verdict.UNRELATED
    # A length said of something else is no word on the move.
    assert verdict("I live in Berlin", "I moved to Paris. My sister visited for a week.") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Paris until June"),
        ("I live in Berlin", "I moved to Paris till August"),
        ("I live in Berlin", "I moved to Paris 'til August"),
        ("I live in Berlin", "I moved to Paris until the end of the year"),
        ("I live in Berlin", "I moved to Paris until my visa expires"),
        ("I live in Berlin", "I moved to Paris through the summer"),
        ("I live in Berlin", "I live in Paris until June"),
        ("I live in Berlin", "I've moved to Paris until June"),
        ("I live in Berlin", "The user moved to London until March 2027"),
        ("I live in Berlin", "User relocated to Paris until the end of the project"),
        ("I live in Berlin", "I moved to Paris, but only until June."),
        ("I live in Berlin", "I moved to Paris. It's just until June."),
        ("I live in Berlin", "I moved to Paris for the next six months"),
        ("I live in Berlin", "I moved to Paris for the next few months"),
        ("I live in Berlin", "I moved to Paris for about six months"),
        ("I live in Berlin", "I moved to Paris for around a year"),
        ("I live in Berlin", "I moved to Paris for at least a year"),
        ("I live in Berlin", "I moved to Paris for a year or two"),
        ("I live in Berlin", "I moved to Paris for 6-8 weeks"),
        ("I live in Berlin", "I moved to Paris for six or seven months"),
        ("I live in Berlin", "I moved to Paris for a couple of months"),
        ("I live in Berlin", "I moved to Paris on a six-month contract"),
        ("I live in Berlin", "I moved to Paris for a six-month contract"),
        ("I live in Berlin", "I moved to Paris for an exchange semester"),
        ("I live in Berlin", "I moved to Paris on secondment"),
        ("I work at Acme", "I work at Globex until March"),
        ("I work at Acme", "I joined Globex until the end of the year"),
        ("I work at Acme", "I joined Globex for about six months"),
        ("I work at Acme", "I joined Globex on a six-month contract"),
        ("I work at Acme", "I joined Globex on a fixed-term contract"),
        ("I work at Acme", "I joined Globex. It's a 6-month contract."),
        ("I work at Acme", "I started working at Globex until June"),
        ("我住在北京", "我搬到上海了，住到六月"),
        ("我住在北京", "我搬到上海，待到年底"),
        ("我住在北京", "我搬到上海了，到明年三月为止"),
        ("我住在北京", "我搬到上海，只住到明年三月"),
        ("我住在北京", "我搬到上海住到年底"),
        ("我住在北京", "我搬到上海直到明年"),
        ("我住在北京", "我搬到上海了，直到年底"),
        ("我住在北京", "我搬到上海住到毕业"),
        ("我住在北京", "我搬去上海交换一学期"),
        ("用户住在广州", "用户搬到深圳，待到合同结束"),
        ("我在阿里工作", "我入职腾讯了，合同半年"),
        ("我在阿里工作", "我跳槽到腾讯了，不过只干到年底"),
    ],
)
def test_a_move_or_a_job_with_an_end_or_for_a_term_is_a_stay(old: str, new: str) -> None:
    # An end date, a length said loosely ("about", "the next", "6-8") or a term of work
    # read as a move or a new job and hid the home or the employer.
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Paris"),
        ("I live in Berlin", "I moved to Paris last June"),
        ("I live in Berlin", "I moved to Paris in June"),
        ("I live in Berlin", "I moved to Paris through a relocation agency"),
        ("I work at Acme", "I joined Globex through a recruiter"),
        ("我住在北京", "我搬到上海，到现在已经三年了"),
        ("我住在北京", "我六月搬到上海了"),
        # A labour contract of a year or more is how most jobs in China are signed.
        ("我在阿里工作", "我跳槽到腾讯了，签了三年的合同"),
    ],
)
def test_a_move_said_with_when_or_how_is_still_a_move(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("move", "same"),
    [("我搬到上海两年", "我住在上海"), ("我搬到上海两年了", "我住在上海"), ("我搬到上海已经三个多月了", "我住在上海")],
)
def test_a_length_after_a_chinese_move_is_the_time_since_it(move: str, same: str) -> None:
    # 搬 is done at once: a length after it tells how long ago (a stay says 住 or 待: 住两年).
    assert verdict("我住在北京", move) is Verdict.REPLACE
    # The length is no part of the place: the same city is the same home.
    assert verdict(same, move) is Verdict.DUPLICATE
    assert verdict("我住在北京", "我搬到上海住两年") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "joined",
    [
        "I joined Equinox",
        "I joined Equinox last week",
        "I joined Equinox near my office",
        "I've joined Equinox",
        "The user joined Equinox in March",
        "I joined SoulCycle",
        "I joined Costco",
        "I joined Strava",
        "I joined Bumble",
        "I joined Weight Watchers",
        "I joined the YMCA",
        "我加入了超级猩猩",
        "我加入了乐刻健身",
        "我加入了Equinox",
        "我加入了Keep",
        "我加入了Costco会员",
    ],
)
def test_joining_a_gym_a_club_or_a_network_by_its_brand_is_no_new_employer(joined: str) -> None:
    # A gym brand read as an employer hid the job.
    old = "我在阿里工作" if "加入" in joined else "I work at Acme"
    assert verdict(old, joined) is Verdict.UNRELATED


def test_working_at_a_gym_or_joining_a_company_is_still_a_new_employer() -> None:
    assert verdict("I work at Acme", "I work at Equinox") is Verdict.REPLACE
    assert verdict("I work at Acme", "I joined Equinox Holdings") is Verdict.REPLACE
    assert verdict("I work at Acme", "I joined Hinge Health") is Verdict.REPLACE
    assert verdict("我在阿里工作", "我加入了腾讯") is Verdict.REPLACE
    assert verdict("我在阿里工作", "我在超级猩猩工作") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Acme", "I've started working at Globex"),
        ("I work at Acme", "I have started working at Globex"),
        ("I work at Acme", "I have just started working at Globex"),
        ("I work at Acme", "I have joined Globex"),
        ("I work at Acme", "I've joined Globex"),
        ("I work at Acme", "I have started at Globex"),
        ("I work at Acme", "I've been working at Globex"),
        ("I work at Acme", "I have been working at Globex since May"),
        ("I live in Berlin", "I have been living in Paris since May"),
        ("I live in Berlin", "I have moved to Paris"),
        ("I live in Berlin", "I've moved to Paris"),
        ("I like coffee", "I've quit coffee"),
        ("I like coffee", "I have stopped drinking coffee"),
        ("I like coffee", "I have given up coffee"),
        ("I don't play tennis", "I've taken up tennis"),
    ],
)
def test_a_change_in_the_perfect_tense_reads_as_in_the_past(old: str, new: str) -> None:
    # "I have started working at Globex" was read as nothing: the old employer stayed beside it.
    assert verdict(old, new) is Verdict.REPLACE


def test_the_perfect_of_a_verb_no_rule_reads_is_no_claim() -> None:
    assert verdict("I work at Acme", "I have been to Globex") is Verdict.UNRELATED
    assert verdict("I work at Acme", "I have left my keys at Globex") is Verdict.UNRELATED
    # How long so far is read as a length, and a length as a stay: nothing is hidden.
    assert verdict("I live in Berlin", "I have been living in Paris for two years") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Paris for the duration of the project"),
        ("I live in Berlin", "I moved to Paris for a stint"),
        ("I live in Berlin", "I moved to Paris for a gap year"),
        ("I live in Berlin", "I moved to Paris on a working holiday visa"),
        ("I work at Acme", "I joined Globex as an intern"),
        ("I work at Acme", "I joined Globex as a summer intern"),
        ("I work at Acme", "I joined Globex's board"),
        ("I work at Acme", "I joined Globex's advisory board"),
        ("I work at Acme", "I joined the Globex alumni network"),
        ("I work at Acme", "I joined Globex Rewards"),
        ("I work at Acme", "I joined Amazon Prime"),
        ("我住在北京", "我搬到上海读一年书"),
        ("我在阿里工作", "我加入了腾讯，做半年的项目"),
        ("我在阿里工作", "我加入了山姆会员店"),
        ("我在阿里工作", "我加入了腾讯的董事会"),
    ],
)
def test_a_stint_an_internship_a_board_or_a_programme_joined_is_no_new_home_or_employer(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.UNRELATED
    # Joined as anything else, it is a job; an internship held before is no employer a job replaces.
    assert verdict("I work at Acme", "I joined Globex as an engineer") is Verdict.REPLACE
    assert verdict("I work at Acme as an intern", "I joined Globex") is Verdict.UNRELATED


def test_a_colour_or_theme_word_inside_a_long_value_is_no_preference() -> None:
    # "light" in what a sleep mask blocks out was read as a theme: it replaced "I like dark mode".
    assert verdict("I like dark mode", "I started using a sleep mask to block out any light") is Verdict.UNRELATED
    assert verdict("I like dark mode", "I've already started using a sleep mask to block out any light") is (
        Verdict.UNRELATED
    )
    assert verdict("I like dark mode", "I switched to light mode") is Verdict.REPLACE
    assert verdict("I prefer the dark mode on my phone", "I switched to light mode") is Verdict.REPLACE
    assert verdict("I like a blue theme", "switch my theme to black") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("earlier", "later", "joined"),
    [
        ("I moved to Paris.", "It's only for six months.", "I moved to Paris. It's only for six months."),
        ("I moved to Paris", "Just until June though.", "I moved to Paris. Just until June though."),
        ("user: I moved to Paris.", "user: it is only for a year", "user: I moved to Paris. it is only for a year"),
        ("我搬到上海了", "只住半年。", "我搬到上海了。只住半年。"),
        ("我搬到上海了。", "不过只是暂时的", "我搬到上海了。不过只是暂时的"),
        ("I joined Globex.", "It's a 6-month contract.", "I joined Globex. It's a 6-month contract."),
    ],
)
def test_a_stay_said_in_a_save_of_its_own_reads_with_the_speakers_text_before(
    earlier: str, later: str, joined: str
) -> None:
    assert says_a_stay(later)
    assert continued(earlier, later) == joined
    old = "我住在北京" if "上海" in earlier else ("I work at Acme" if "Globex" in earlier else "I live in Berlin")
    assert verdict(old, earlier) is Verdict.REPLACE
    assert verdict(old, joined) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("user: I moved to Paris.", "Marco: only for a year"),  # another speaker's line
        ("I moved to Paris.", "My sister is staying with me for a month."),  # a claim of its own
        ("I moved to Paris.", "For how long? A year."),  # a question
        ("I moved to Paris.", "Thanks!"),
        ("I moved to Paris.", "It's only for six months. I love the food."),
        ("assistant: Paris is lovely.", "assistant: only for a year"),
    ],
)
def test_a_save_that_says_more_than_a_stay_is_read_alone(earlier: str, later: str) -> None:
    assert continued(earlier, later) is None


@pytest.mark.parametrize(
    "said",
    [
        "I moved to Paris for a good while",
        "I moved to Paris for a long while",
        "I moved to Paris for half a year",
        "I moved to Paris for eight months",
        "I moved to Paris for nine months",
        "I moved to Paris for twelve months",
        "I moved to Paris for the academic year",
        "I moved to Paris for the season",
        "I moved to Paris for an internship",
        "I moved to Paris for a sabbatical",
    ],
)
def test_a_move_for_other_lengths_of_a_while_is_a_stay(said: str) -> None:
    # Lengths the stay did not list read as a move and hid the home.
    assert verdict("I live in Berlin", said) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I moved to Paris for good") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris for my new job") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Paris. Mom is staying with me, just for a month."),
        ("I live in Berlin", "I moved to Paris. My sister too, but only for a month."),
        ("I live in Berlin", "I moved to Paris. Just for a week? No, for good."),
        ("I live in Berlin", "I moved to Paris. Temporary? No!"),
        ("我住在北京", "我搬到上海了。我父母住了一个星期，只是暂时的"),
    ],
)
def test_a_stay_said_of_someone_else_or_asked_leaves_the_move_a_move(old: str, new: str) -> None:
    # A clause saying only "for a month" made every home of the text a stay, though it
    # was said of another sentence's guest, or asked and answered "for good".
    assert verdict(old, new) is Verdict.REPLACE
    # Said of the move itself, in its sentence or the next, it is still a stay.
    assert verdict("I live in Berlin", "I moved to Paris and I love it, but only for a year") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I moved to Paris. Only for a year though.") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "我搬到上海有一段时间了",
        "我搬到上海好一段时间了",
        "我搬到上海很长一段时间了",
        "我搬到上海一阵子了",
        "我搬到上海一段时间了",
    ],
)
def test_a_chinese_move_a_while_ago_is_a_move(said: str) -> None:
    # Since when, not for how long: read as 我搬到上海一段时间 (a stay), the move was missed.
    assert verdict("我住在北京", said) is Verdict.REPLACE
    assert verdict("我住在北京", "我搬到上海一段时间") is Verdict.UNRELATED
    assert verdict("我住在北京", "我搬去上海待一阵子") is Verdict.UNRELATED


def test_a_stay_said_in_a_clause_of_its_own_is_still_what_the_older_memory_says() -> None:
    # Its stay read as no claim, the clause still holds something a newer name does not replace.
    assert verdict("My name is Anna. I moved to Paris, just for a month.", "Call me Anne") is Verdict.CONTRADICT


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I live in Europe now"),
        ("I live in Berlin", "I moved to the south"),
        ("I live in Munich", "I moved to southern Germany"),
        ("I live in Boston", "I moved to the East Coast"),
        ("I live in Leeds", "I moved to the north of England"),
        ("我住在北京", "我住在南方"),
        ("我住在北京", "我搬到北方了"),
        ("我住在北京", "我现在住在欧洲"),
        ("我住在北京", "我搬到国外了"),
        ("我住在苏州", "我搬到江苏南部了"),
        # A country after a city, or a city after a country: the same home, maybe.
        ("I live in Berlin", "I live in Germany now"),
        ("I live in Germany", "I moved to Berlin"),
        ("我住在北京", "我住在中国"),
        ("我住在中国", "我搬到北京了"),
    ],
)
def test_a_region_that_may_hold_the_home_does_not_replace_it(old: str, new: str) -> None:
    # Read as a city, "Europe", "the south" and "南方" hid the city they may hold.
    assert verdict(old, new) is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin", "I moved to Singapore"),
        ("I live in Tokyo", "I live in Singapore now"),
        ("I live in Singapore", "I moved to Hong Kong"),
    ],
)
def test_a_city_state_is_a_city(old: str, new: str) -> None:
    # Singapore, a country too, was weighed as one: it "may hold" Berlin, and the move was missed.
    assert verdict(old, new) is Verdict.REPLACE


def test_one_country_or_one_city_after_another_still_replaces() -> None:
    assert verdict("I live in Germany", "I moved to France") is Verdict.REPLACE
    assert verdict("我住在德国", "我搬到法国了") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Rome") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to South Africa") is Verdict.UNRELATED  # a country: see above


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Google", "I also work at Acme"),
        ("I work at Google", "I work at Acme too"),
        ("I work at Google", "I work for Acme on the side"),
        ("I work at Google", "I work at Acme also"),
        ("I live in Berlin", "I also live in Paris"),
        ("I live in Berlin", "I live in Paris as well"),
        ("我在阿里工作", "我也在腾讯工作"),
        ("我住在北京", "我也住在上海"),
        ("我住在北京", "我同时住在上海"),
    ],
)
def test_a_home_or_a_job_besides_the_one_the_user_has_replaces_nothing(old: str, new: str) -> None:
    # "Also", "too", "on the side", 也: a second job or home, or the same as someone else's,
    # read as a new one, hid the first.
    assert verdict(old, new) is Verdict.UNRELATED
    # Older, such a job is not hidden by a new one either: which of the two was left, the
    # rules cannot tell ("as well" is still no role: see the role's tests).
    assert verdict("I work at Acme as well", "I joined Globex") is Verdict.UNRELATED
    # A move or a new job said so is still one: the old one was left.
    assert verdict("I live in Berlin", "I also moved to Paris") is Verdict.REPLACE
    assert verdict("我住在北京", "我也搬到上海了") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    ["My home is in Europe now", "Home: Europe", "My home is in Paris for now", "My home is in Paris half the time"],
)
def test_a_home_said_as_an_attribute_in_a_region_or_for_a_while_is_no_new_home(said: str) -> None:
    # The attribute reading took no notice of what "I live in …" is read with.
    assert verdict("I live in Berlin", said) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "My home is in Paris now") is Verdict.REPLACE
    assert verdict("I work at Google", "My new job is at Acme for the summer") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Google", "I joined a gym"),
        ("I work at Google", "I joined a book club"),
        ("I work at Google", "I joined the choir"),
        ("I work at Google", "I joined a running club last week"),
        ("I work at Google", "I started at a new gym"),
        ("我在阿里工作", "我加入了读书会"),
        ("我在阿里工作", "我加入了一个跑步俱乐部"),
        ("我在阿里工作", "我加入了健身房"),
        ("I work at Google", "I joined a book circle"),
        ("I work at Google", "I joined a pottery workshop"),
        ("I work at Google", "I joined a coding bootcamp"),
        ("I work at Google", "I joined a running crew"),
        ("I work at Google", "I joined a carpool"),
        ("I work at Google", "I joined Toastmasters"),
        ("我在阿里工作", "我加入了合唱队"),
        ("我在阿里工作", "我加入了跑团"),
        ("我在阿里工作", "我加入了瑜伽馆"),
    ],
)
def test_joining_a_gym_a_club_or_a_class_is_no_new_employer(old: str, new: str) -> None:
    # "Joined" read whatever it was as an employer: a gym hid Google.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("I work at Google", "I started working at a gym") is Verdict.REPLACE
    assert verdict("I work at Google", "I joined a startup") is Verdict.REPLACE
    assert verdict("我在阿里工作", "我加入了蚂蚁集团") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    [
        "I joined Alibaba Group",
        "I joined Goldman Sachs Group",
        "I joined Studio Ghibli",
        "I joined Club Med",
        "I joined Band Inc",
        "I joined Community Health Systems",
        "I joined Server Labs as an engineer",
    ],
)
def test_joining_a_company_named_with_a_club_word_is_a_new_employer(said: str) -> None:
    # "Group", "studio", "club" anywhere in what was joined made it a club: the new
    # employer was missed. A club is the head of what was joined, and a bare name
    # ending in "Group" is a company.
    assert verdict("I work at Google", said) is Verdict.REPLACE
    assert verdict("I work at Google", "I joined a hiking group near my office") is Verdict.UNRELATED
    assert verdict("I work at Google", "I joined the Sierra Club in 2020") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "我跟着男朋友搬到了上海",
        "我跟着老公搬到了上海",
        "我跟着女朋友搬到了上海",
        "我跟着父母搬到了上海",
        "我随父母搬到了上海",
        "我跟着家人搬到了上海",
    ],
)
def test_a_chinese_move_following_the_family_is_the_users_move(said: str) -> None:
    # "跟着男朋友" read as someone else ("user的跟着男朋友" moved), as "跟老婆" did not: the
    # move was missed. Who came along is more than the home, as with a friend.
    assert [claim.holder for claim in claims(said)] == ["user"]
    assert verdict("我住在北京", said) is Verdict.REPLACE
    assert verdict(said, "我搬到杭州了") is Verdict.CONTRADICT
    # 陪 may be helping them move ("我陪朋友搬家"): not read as the user's move.
    assert verdict("我住在北京", "我陪老公搬到了上海") is Verdict.UNRELATED


def test_a_chinese_move_on_a_whim_is_a_move_and_a_decision_is_none() -> None:
    # 临时起意 ("on a whim") read as 临时 ("for now"), and 突然 as someone else.
    for said in ("我临时起意搬到了上海", "我突然搬到上海了", "我一时兴起搬到了上海"):
        assert verdict("我住在北京", said) is Verdict.REPLACE, said
    # 临时决定 is decided on the spot: a plan, as "我决定搬到上海" and "I decided to move to Paris" are.
    assert verdict("我住在北京", "我临时决定搬到上海") is Verdict.UNRELATED
    assert verdict("我住在北京", "我决定搬到上海") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I decided to move to Paris") is Verdict.UNRELATED
    assert verdict("我带着孩子搬到了上海", "我搬到杭州了") is Verdict.CONTRADICT


@pytest.mark.parametrize(
    "said",
    [
        "我住在上海的时候很开心",
        "我和朋友住在上海的时候很开心",
        "我和朋友住在上海时很开心",
        "我和朋友住在上海那年",
        "我和朋友搬到上海的时候认识了他",
        "我在腾讯工作期间认识了他",
    ],
)
def test_a_chinese_home_told_as_a_time_replaces_nothing(said: str) -> None:
    # "When I lived in Shanghai (with my friend) I was happy" tells of a time, as "When I
    # lived in Paris I was happy" does in English: it superseded "我住在北京" (the
    # companion, read as the user's, widened it), and hid where the user lives now.
    assert verdict("我住在北京", said) is Verdict.UNRELATED
    assert verdict("我在阿里工作", said) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "When I lived in Paris I was happy") is Verdict.UNRELATED
    # What the clauses after it say held then too; not "有时候", "平时".
    assert verdict("我在阿里工作", "我住在上海的时候，在腾讯工作") is Verdict.UNRELATED
    assert verdict("我住在北京", "我和朋友住在上海") is Verdict.REPLACE
    assert verdict("我住在北京", "我平时住在上海") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    ["我搬到上海住一段时间", "我搬到上海出差一周", "我搬到上海过暑假", "我搬到上海住两个星期", "我搬到上海待一阵子"],
)
def test_a_move_for_a_while_is_no_new_home_in_chinese_either(said: str) -> None:
    # As in English: read as a home, a while in Shanghai hid the home in Beijing.
    assert verdict("我住在北京", said) is Verdict.UNRELATED
    # A move for a reason, or since a while ("已经一周了"), is still a move.
    assert verdict("我住在北京", "我搬到上海工作") is Verdict.REPLACE
    assert verdict("我住在北京", "我搬来上海已经一周了") is Verdict.REPLACE
    assert verdict("我住在北京", "我搬到上海一年了") is Verdict.REPLACE


@pytest.mark.parametrize(
    "said",
    [
        "btw I moved to Paris",
        "btw i live in Paris now",
        "by the way I moved to Paris",
        "FYI I moved to Paris",
        "As of today I live in Paris",
        "As of today, I live in Paris",
        "as of now I live in Paris",
        "I live in Paris as of today",
        "so I moved to Paris",
        "well I moved to Paris",
        "Well I live in Paris now",
        "oh I moved to Paris",
        "Oh I live in Paris now",
        "anyway I moved to Paris",
        "Honestly I live in Paris now",
        "basically I moved to Paris",
        "I live in Paris, France now",
    ],
)
def test_a_home_after_a_word_that_only_opens_the_sentence_replaces_and_is_replaced(said: str) -> None:
    # Without a comma after it, "btw", "by the way", "well" or "oh" read as the subject (or
    # "oh" as a greeting), and "as of today" as a day's stay: no home, so no replacement.
    assert verdict("I live in Berlin", said) is Verdict.REPLACE
    assert verdict(said, "I moved to Rome") is Verdict.REPLACE
    # A plan, a day's stay, a greeting: still no home.
    assert verdict("I live in Berlin", "As of next week I live in Paris") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "btw today I stay in Paris") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "oh my god, Paris") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "I told you I live in Paris",
        "I told you that I moved to Paris",
        "I said I live in Paris",
        "like I said I moved to Paris",
        "As I said, I live in Paris",
        "As I mentioned before, I moved to Paris",
    ],
)
def test_an_english_home_after_i_told_you_is_the_holders(said: str) -> None:
    # "I told you" read as the clause ("told" brings in someone else), and "As I said" as a
    # clause of its own that says more than the home.
    assert verdict("I live in Berlin", said) is Verdict.REPLACE
    assert verdict(said, "I moved to Rome") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I told you my sister lives in Paris") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I never told you I live in Paris") is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I told you she lives in Paris") is Verdict.UNRELATED


@pytest.mark.parametrize(
    "said",
    [
        "I told you I live in Paris, but I lied",
        "I told you I live in Paris but I was joking",
        "I said I live in Paris, but that's not true",
        "I told you I live in Paris. That was a lie.",
        "I live in Paris, just kidding",
        "I live in Paris. Not really, I'm kidding",
        "我和你说过我住在上海，其实是骗你的",
        "我说过我住在上海是开玩笑的",
        "我住在上海，开玩笑的",
        "我跟你说过我住在上海，那是假的",
    ],
)
def test_a_home_taken_back_in_the_same_text_is_no_home(said: str) -> None:
    # "I told you …" invites "… but I lied": read as the holder's home, the lie hid the
    # home it was told against.
    old = "I live in Berlin" if said.isascii() else "我住在北京"
    assert verdict(old, said) is Verdict.UNRELATED
    assert verdict(said, "I moved to Rome" if said.isascii() else "我搬到杭州了") is Verdict.UNRELATED
    assert claims(said) == ()


@pytest.mark.parametrize(
    "said",
    [
        "不是骗你的，我住在上海",
        "我没骗你，我住在上海",
        "我没有骗你，我住在上海",
        "我住在上海，这不是开玩笑的",
        "我住在上海，不是开玩笑",
        "我不是在开玩笑，我住在上海",
        "我住在上海，别以为我在开玩笑",
        "我住在上海，骗你是小狗",
        "Tom thinks I lied, but I live in Paris",
        "My boss said I was joking, but I live in Paris",
        "I live in Paris and read JK Rowling every night",
        "I made it up to Paris at last, and I live in Paris now",
    ],
)
def test_a_home_said_to_be_no_lie_is_a_home(said: str) -> None:
    # "I'm not lying to you", "this is no joke" insist on what is said: read as taken
    # back, the home said so replaced no earlier one.
    # Another's word that the speaker lied, "JK Rowling", "made it up to" take nothing back.
    assert verdict("I live in Berlin" if said.isascii() else "我住在北京", said) is Verdict.REPLACE
    assert verdict("I live in Berlin", "I'm not kidding, I moved to Paris") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user works at Google", "The user's new job is at Acme"),
        ("I work at Google", "My new job is at Acme"),
        ("I work at Google", "My new job is now at Acme"),
    ],
)
def test_a_new_job_at_somewhere_is_a_new_employer(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE
    assert verdict(old, "My job is at risk") is Verdict.UNRELATED
    assert verdict(old, "My new job is great") is Verdict.UNRELATED
    assert verdict(old, "My new job is at home") is Verdict.UNRELATED
    assert verdict(old, "My sister's new job is at Acme") is Verdict.UNRELATED
    assert verdict(old, "My new job is at the same company") is Verdict.UNRELATED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Google", "I want my husband to leave Google and work at Acme"),
        ("I work at Google", "I asked my wife to quit Google and work at Acme"),
        ("I work at Google", "I let my daughter quit school and work at Acme"),
        ("I work at Google", "I saw Tom quit and work at Acme"),
        ("I work at Google", "I wish my son would quit and work at Acme"),
        ("I live in Berlin", "I want my mom to retire and live in Paris"),
        ("I live in Berlin", "I told my son to move out and live in Paris"),
        ("I live in Berlin", "I helped my son find a flat and live in Paris"),
        ("I live in Berlin", "I want to retire and live in Paris"),
        ("I live in Berlin", "I would quit and live in Paris"),
        ("The user lives in Berlin", "The user asked her son to move out and live in Paris"),
    ],
)
def test_a_bare_verb_joined_to_a_wish_a_request_or_a_modal_is_no_claim(old: str, new: str) -> None:
    # It goes on with the verb left open ("… to retire and live in Paris" is "… to live in
    # Paris"), which is no one's claim; since f977d0d it was read as the user's.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("I live in Berlin", "I have two kids and live in Paris") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I moved to Paris and live there now") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I wanted to stay but live in Paris now") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I decided to quit and moved to Paris") is Verdict.REPLACE
    assert verdict("I live in Berlin", "I watched the news and live in Paris") is Verdict.REPLACE


def test_a_long_run_of_chinese_adverbials_is_read_in_linear_time() -> None:
    """The words before a Chinese rule's verb are read on every save. Read by a regex whose
    alternatives overlap under a star ("以后" is also "以" + "后"), 40 characters of them
    took a minute and 8,000 would never return. A fresh interpreter, so a hang fails."""
    script = """
from engine.conflicts import claims
for text in ("我" + "以后" * 4000 + "张住在上海", "我" + "刚" * 8000 + "张住在上海", "我" + "后" * 8000 + "张住在上海"):
    claims(text)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "text",
    ["我住在" + "上海" * 40, "我从" + "阿里" * 40 + "离职了", "我叫" + "明" * 80, "把" + "主题" * 40 + "改成黑色"],
    ids=["home", "employer", "name", "setting"],
)
def test_a_chinese_value_longer_than_any_claim_holds_none(text: str) -> None:
    # The labelled pairs' longest Chinese value is 10 characters; reading 8,000 (one
    # segmentation, or "从…离职" tried from every 从) cost up to half a second a save.
    assert claims(text) == ()
    assert claims("我住在浙江省杭州市西湖区文三路123号某某小区5幢2单元301室") != ()


def test_a_long_run_of_spaces_is_split_into_clauses_in_linear_time() -> None:
    """Every text is split into clauses at "… and …": tried from every space of a run,
    8,000 spaces took a third of a second and 200,000 minutes. A fresh interpreter, so a
    hang fails."""
    script = 'from engine.conflicts import claims; claims("I" + " " * 200_000 + "live in Rome")'
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_names_someone_is_fond_of_and_a_trip_are_read_in_linear_time() -> None:
    """A fresh interpreter, so a hang fails."""
    script = """
from engine.conflicts import claims
for text in ("The user loves " + "Anna " * 40000 + ". She lives in Paris", "loves " * 40000,
             "I met Tom and " + "now " * 40000 + "lives in Paris", "I stay " + "with " * 40000 + "in Paris",
             "I am on a trip. " + "I stay in Paris. " * 5000, "用户喜欢" + "张伟" * 4000 + "，他住在上海",
             "用户是" + "张" * 8000 + "的朋友，他住在上海"):
    claims(text)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_restating_the_same_claim_is_a_duplicate() -> None:
    assert verdict("我喜欢蓝色", "用户喜欢蓝色") is Verdict.DUPLICATE
    assert verdict("User prefers dark mode", "The user likes dark mode") is Verdict.DUPLICATE


def test_explicit_keys_decide_the_subject() -> None:
    assert verdict("Budget: 2000", "Budget: 3500", old_key="trip.budget", new_key="trip.budget") is Verdict.REPLACE
    assert verdict("I like coffee", "I quit coffee", old_key="a", new_key="b") is Verdict.UNRELATED
    assert verdict("Budget: 2000", "budget:  2000", old_key="k", new_key="k") is Verdict.DUPLICATE


def test_detect_leaves_unrelated_out_and_asks_the_fallback_judge_only_about_those() -> None:
    asked: list[str] = []

    def fallback(new: Statement, old: Statement) -> Judgement | None:
        asked.append(old.text)
        return Judgement(Verdict.CONTRADICT, "judge") if "tea" in old.text else None

    olds = [
        Statement("I like coffee", memory_id="a"),
        Statement("I like tea", memory_id="b"),
        Statement("x", memory_id="c"),
    ]
    found = detect(Statement("I quit coffee"), olds, fallback=fallback)
    assert [(old.memory_id, j.verdict) for old, j in found] == [("a", Verdict.REPLACE), ("b", Verdict.CONTRADICT)]
    assert asked == ["I like tea", "x"]
    assert [old.memory_id for old, _ in detect(Statement("I quit coffee"), olds)] == ["a"]


def test_the_labelled_set_is_large_varied_and_bilingual() -> None:
    pairs = load()
    assert len(pairs) >= 150
    assert sum(pair.lang == "zh" for pair in pairs) >= 60
    assert {pair.label for pair in pairs} == set(Verdict)
    assert len({(pair.old.text, pair.new.text) for pair in pairs}) == len(pairs)


# Floors below what the detector measures (benchmarks/conflicts.py prints the numbers),
# so that a change which makes it worse fails. Holdout pairs were written after the rules.
FLOORS = {
    ("dev", Verdict.REPLACE): (0.95, 0.95),
    ("dev", Verdict.CONTRADICT): (0.95, 0.95),
    ("dev", Verdict.DUPLICATE): (0.95, 0.9),
    ("dev", Verdict.UNRELATED): (0.9, 0.95),
    ("holdout", Verdict.REPLACE): (0.9, 0.6),
    ("holdout", Verdict.CONTRADICT): (0.95, 0.85),
    ("holdout", Verdict.DUPLICATE): (0.95, 0.95),
    ("holdout", Verdict.UNRELATED): (0.55, 0.95),
}


@pytest.mark.parametrize(("split", "label"), sorted(FLOORS))
def test_precision_and_recall_stay_above_their_floors(split: str, label: Verdict) -> None:
    results = [(pair, got) for pair, got in predict(load()) if pair.split == split]
    measured = scores(results, label)
    precision_floor, recall_floor = FLOORS[(split, label)]
    assert measured.support > 0
    assert measured.precision >= precision_floor, measured
    assert measured.recall >= recall_floor, measured


# --- transcripts: lines of a chat log are not claims about one slot -------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Marco: Thanks for asking, the trip was long but fun.", "Marco: Do you think cats and dogs get along?"),
        ("Lena: Haha, you are welcome, have a good weekend!", "Lena: That is great news! Keep going!"),
        ("user: I need help writing an email to my landlord.", "user: Can you recommend a book about gardening?"),
        ("assistant: I am sorry to hear that.", "assistant: Sure, here are three options."),
        ("Marco: Yes", "Marco: No"),
        ("Marco: Blue", "Marco: Black"),
        ("用户：今天是星期五", "用户：今天是星期六"),
        ("Lisa: 我觉得数学最难，总是记不住那些公式。", "Lisa: 每次碰到这样的事情，我都会控制不住地心跳加速。"),
        ("Bart: I like it! I also enjoy drawing.", "Bart: Yes, I don't like it when they argue."),
        ("Lisa: Yes, I enjoy painting.", "Lisa: Every time they say that, I just don't want to paint anymore."),
        ("user: I'm not sure where to start.", "user: I'm pretty sure I threw away an old pair of sandals recently."),
        (
            "user: Make sure to cite results using [[number](URL)] notation.",
            "user: Just make sure to have a safe game.",
        ),
        ("the weather is cold", "the weather is nice now"),
    ],
)
def test_chat_lines_neither_replace_nor_contradict(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.UNRELATED


ENGLISH_CHAT = [
    "user: Hi! I'm planning a trip to Japan next spring.",
    "assistant: That sounds wonderful! Do you know which cities you want to visit?",
    "user: Tokyo and Kyoto for sure. I'm not sure about Osaka.",
    "assistant: Great choices. Make sure to book the ryokan early, they fill up fast.",
    "user: Thanks! My budget is around $3000.",
    "assistant: That is a comfortable budget for two weeks.",
    "user: Can you suggest a good itinerary?",
    "assistant: Sure, here are three options.",
    "Marco: I just got back from Lisbon, the trip was long but fun.",
    "Marco: Do you think cats and dogs get along?",
    "Lena: Haha, you are welcome, have a good weekend!",
    "Lena: That is great news! Keep going!",
    "user: I have been practising the guitar every evening.",
    "user: I'm thinking of buying a new laptop, my current one is a bit old.",
    "user: My goal is to run a half marathon this year.",
    "user: The goal is to sell more subscriptions.",
]
CHINESE_CHAT = [
    "用户：你好，我最近在学做菜。",
    "助手：太好了！你想学哪一类菜呢？",
    "用户：我喜欢川菜，但是不太能吃辣。",
    "助手：可以先从不太辣的宫保鸡丁开始。",
    "用户：谢谢！今天是星期五，我晚上有空。",
    "用户：今天是星期六，我想出去走走。",
    "Lisa：我觉得数学最难，总是记不住那些公式。",
    "Lisa：每次碰到这样的事情，我都会控制不住地心跳加速。",
    "Bart：嗯，我觉得很难过，感觉他们不喜欢我。",
    "Bart：可是我迟到了老师肯定会说我的。",
    "Bart：还没有呢，但听起来很有趣！",
]


@pytest.mark.parametrize("transcript", [ENGLISH_CHAT, CHINESE_CHAT], ids=["english", "chinese"])
def test_no_line_of_a_chat_transcript_replaces_or_contradicts_another(transcript: list[str]) -> None:
    clashes = [
        (old, new)
        for number, new in enumerate(transcript)
        for old in transcript[:number]
        if verdict(old, new) in (Verdict.REPLACE, Verdict.CONTRADICT)
    ]
    assert clashes == []


def test_a_speaker_prefix_names_who_holds_the_claim() -> None:
    assert verdict("Marco: I live in Lyon", "Marco: I moved to Paris") is Verdict.REPLACE
    assert verdict("小明：我住在上海", "小明：我搬到北京了") is Verdict.REPLACE
    assert verdict('<Bart>:"我喜欢蓝色"', '<Bart>:"把主题改成黑色"') is Verdict.REPLACE
    # Marco's home is not the user's, nor Lena's.
    assert verdict("I live in Lyon", "Marco: I moved to Paris") is Verdict.UNRELATED
    assert verdict("Lena: I live in Lyon", "Marco: I moved to Paris") is Verdict.UNRELATED
    # "user:" is the user; the assistant's own lines claim nothing.
    assert verdict("user: I live in Lyon", "I moved to Paris") is Verdict.REPLACE
    assert verdict("assistant: I live in the cloud", "assistant: I moved to a new server") is Verdict.UNRELATED
    # In a speaker's line "she" is someone else, and "my sister" is the speaker's sister.
    assert verdict("Marco: she lives in Rome", "Marco: she moved to Milan") is Verdict.UNRELATED
    assert verdict("Marco: my sister lives in Rome", "Marco: my sister moved to Milan") is Verdict.REPLACE


def test_the_seeds_update_case_and_labelled_attributes_still_replace() -> None:
    assert verdict("I like a blue theme", "switch my theme to black") is Verdict.REPLACE
    assert verdict("user: I like a blue theme", "user: switch my theme to black") is Verdict.REPLACE
    assert verdict("Notification channel: email", "Notification channel: WeChat") is Verdict.REPLACE
    assert verdict("The weekly sync is on Tuesday", "The weekly sync was moved to Thursday") is Verdict.REPLACE


def test_a_generic_attribute_replaces_only_when_its_holder_says_it_changed() -> None:
    assert verdict("My budget is around $200 per night", "My budget is around $500") is Verdict.UNRELATED
    assert verdict("User's monthly budget is 500 dollars", "User's monthly budget is now 800 dollars") is (
        Verdict.REPLACE
    )
    assert verdict("Deadline: Friday", "Deadline: Monday") is Verdict.UNRELATED
    assert verdict("Deadline: Friday", "Deadline: Monday", old_key="deadline", new_key="deadline") is Verdict.REPLACE


def test_no_hand_labelled_pair_of_real_dialogue_lines_is_a_replacement() -> None:
    """100 pairs of MADial-Bench lines the earlier rules superseded, each labelled by hand."""
    pairs = load_labels()
    assert len(pairs) == 100
    replaced = [(old, new) for (old, new), label in pairs.items() if verdict(old, new) is Verdict.REPLACE]
    assert all(label == "not_replace" for label in pairs.values())
    assert replaced == []


@pytest.mark.parametrize(
    "text",
    [
        "To clean the espresso machine, Hugo Rossi first tags the commit and then reads the checklist",
        "Sounds like a plan!",
        "Just use the app every morning.",
        "user: I think I'll try another restaurant, but still has the Dragon Roll on the menu.",
    ],
)
def test_a_word_that_names_no_one_holds_no_claim(text: str) -> None:
    """A clause opened by an adverb or a verb ("then reads", "sounds like") is about whoever the
    sentence is about; read as the claim of someone called "then", it would meet every other
    "… then reads …" line of the namespace."""
    assert [claim.holder for claim in claims(text) if claim.holder not in ("user", "hugo rossi")] == []


def test_a_name_that_is_also_a_word_still_holds_claims() -> None:
    assert verdict("May lives in Paris", "May moved to London") is Verdict.REPLACE
    assert verdict("Will lives in Paris", "Will moved to London") is Verdict.REPLACE


def test_texts_judged_other_than_unrelated_share_a_claim_slot() -> None:
    """The fast network leaves out of a save's conflict candidates those whose claim slots
    miss the new memory's (``slots_of``): that must never drop a pair the rules would
    judge. Every pair of the labelled texts and the chat lines, both ways, without keys."""
    labelled = [text for pair in load() for text in (pair.old.text, pair.new.text)]
    texts = list(dict.fromkeys(labelled + ENGLISH_CHAT + CHINESE_CHAT))
    related = missed = spared = 0
    for old in texts:
        for new in texts:
            if old == new:
                continue
            meets = bool(slots_of(old) & slots_of(new))
            if verdict(old, new) is not Verdict.UNRELATED:
                related += 1
                missed += not meets
            elif slots_of(old) and slots_of(new) and not meets:
                spared += 1  # both hold claims, about different things: not read
    assert missed == 0
    assert related > 2_000 and spared > 100_000  # the check has pairs of both kinds to hold


def test_english_claims_are_read_without_loading_the_chinese_segmenter() -> None:
    """The attribute vocabularies hold Chinese words too; an English claim must not segment
    them: that loads jieba's dictionary (about 1.7 s) at the first English save. A fresh
    interpreter, since another test may have loaded it already."""
    script = """
import jieba
from engine.conflicts import Statement, claims, detect
assert claims("My favourite colour is blue") and claims("Deadline: Friday")
assert detect(Statement("My favourite colour is now green"), [Statement("My favourite colour is blue", None, "a")])
assert not jieba.dt.initialized, "English claims loaded jieba"
assert claims("我最喜欢的颜色是蓝色") and jieba.dt.initialized
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("用户住在杭州", "用户佩服轩辕。她住在厦门"),
        ("用户住在杭州", "用户想起了张伟，他住在上海"),
        ("用户住在杭州", "用户提起欧阳，她住在上海"),
        ("The user lives in Berlin", "The user proposed to Anna. She lives in Rome"),
    ],
)
def test_he_or_she_after_someone_named_as_the_object_of_a_verb_is_no_one(old: str, new: str) -> None:
    # A double surname alone ("轩辕") was no name, and "想起", "proposed to" were no verbs
    # that bring someone in: the 她, 他 or "she" was the user.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("用户住在杭州", "用户想起了上海。她搬到厦门了") is Verdict.REPLACE
    assert verdict("The user lives in Berlin", "The user proposed to the board. She lives in Rome") is Verdict.REPLACE


# --- a replacement is whole or it is none -------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My name is Anna and I live in Oslo.", "I live in Bergen now."),
        ("My secret project is called Bluebird and I live in Lisbon.", "我住在杭州"),
        ("I live in Oslo and I love my dog.", "I moved to Bergen."),
        ("I live in Oslo. Can you recommend a dentist?", "I moved to Bergen."),
        ("I live in Oslo. I met Tom. He lives in Rome.", "I moved to Bergen."),
        ("我叫安娜，住在奥斯陆", "我搬到杭州了"),
        ("I like coffee and I play tennis every Sunday", "I quit coffee"),
        ("I live in Oslo, with my wife", "I moved to Bergen."),
        ("I live in Oslo, 2 kids", "I moved to Bergen."),
        ("I live in Oslo, Dog lover", "I moved to Bergen."),
        ("我住在奥斯陆，养了一只狗", "我搬到杭州了"),
        # Capitalised or opening with "in"/"at"/"on", a phrase after a comma is not a place.
        ("I live in Oslo, Dog Lover", "I moved to Bergen."),
        ("I live in Oslo, Vegan", "I moved to Bergen."),
        ("I live in Oslo, Two Cats", "I moved to Bergen."),
        ("I live in Oslo, Retired", "I moved to Bergen."),
        ("I live in Oslo, in debt", "I moved to Bergen."),
        ("I live in Oslo, on medication", "I moved to Bergen."),
        ("I live in Oslo, at Google", "I moved to Bergen."),
        ("I live in Oslo, near Anna", "I moved to Bergen."),
        # Only a home is told more closely by a place after it.
        ("I work at Acme, Vegan", "I joined Globex"),
        ("I work at Acme, Germany", "I joined Globex"),
        # The role said with the employer is more than the employer.
        ("I work as a nurse at Acme", "I joined Globex"),
        ("I work at Acme as a nurse", "I joined Globex"),
        # Who shares the home, or lives near it, is more than the home.
        ("I live in Oslo with my wife", "I moved to Paris"),
        ("I live with my wife in Oslo", "I moved to Paris"),
        ("I live in Oslo near my parents", "I moved to Bergen"),
        ("我和老婆住在奥斯陆", "我搬到巴黎了"),
        ("I live in Oslo with my wife and kids", "I moved to Paris with my wife"),
        ("I live with my wife in Oslo", "I moved to Paris with my husband"),
    ],
)
def test_a_replacement_of_one_claim_leaves_the_others_in_recall(old: str, new: str) -> None:
    """The older text says more than the claim the newer one replaces (another claim, or a
    clause the rules read nothing in): hiding it would lose that, so it is a contradiction."""
    judged = judge(Statement(new), Statement(old))
    assert judged.verdict is Verdict.CONTRADICT
    assert "but the older memory says more" in judged.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Oslo.", "I live in Bergen now."),
        ("My name is Anna and I live in Oslo.", "My name is Anna and I live in Bergen now."),
        ("Thanks! I live in Oslo.", "I moved to Bergen."),
        ("I live in Oslo now.", "I moved to Bergen."),
        # A place that tells the replaced value more closely goes with it.
        ("I live in Berlin, Germany", "I moved to Paris"),
        ("I live in Porto, by the river", "I moved to Lisbon"),
        ("I live in New York, Upper West Side", "I moved to Boston"),
        ("I live in Oslo, Norway.", "I moved to Paris"),
        # A word that only opens the sentence says nothing.
        ("Actually, I live in Oslo.", "I moved to Bergen."),
        ("Well, I live in Oslo.", "I moved to Bergen."),
        ("Btw, I live in Oslo.", "I moved to Bergen."),
        ("By the way, I live in Oslo.", "I moved to Bergen."),
        ("Currently, I live in Oslo.", "I moved to Bergen."),
        ("对了，我住在奥斯陆", "我搬到杭州了"),
        ("其实，我住在奥斯陆", "我搬到杭州了"),
        # The role repeated with the new employer, or a clause repeated word for word.
        ("I work as a nurse at Acme", "I work as a nurse at Globex now"),
        ("I live in Oslo, with my wife", "I moved to Bergen, with my wife"),
        ("I work at Acme as before", "I joined Globex"),
        ("I live in Oslo and I love my dog.", "I moved to Bergen and I love my dog."),
        ("I live in Oslo with my wife", "I moved to Paris with my wife"),
        # The companion is repeated, whatever word comes after it, and a Chinese move says it too.
        ("I live with my wife in Oslo", "I moved to Paris with my wife"),
        ("I live in Oslo with my wife now", "I moved to Paris with my wife"),
        ("I live in Oslo with my wife", "I moved to Paris with my wife last year"),
        ("我和老婆住在奥斯陆", "我和老婆搬到巴黎了"),
        # A 和 or 同 in the place after the home verb is no companion.
        ("我住在和平里住了十年", "我搬到杭州了"),
        ("我住在上海同安路附近住了三年", "我搬到北京了"),
    ],
)
def test_a_memory_whose_every_claim_is_replaced_or_repeated_is_replaced(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


def test_time_order_asks_whether_the_back_dated_text_is_replaced_whole() -> None:
    """``hidden="new"``: the new text is back-dated before the old one, so a replacement
    would hide the new one; it is the new one's other claims that keep it."""
    new, old = Statement("My name is Anna and I live in Oslo."), Statement("I live in Bergen.")
    assert judge(new, old).verdict is Verdict.REPLACE  # Bergen says nothing else
    judged = judge(new, old, hidden="new")
    assert judged.verdict is Verdict.CONTRADICT and "back-dated memory says more" in judged.reason
    lima, bergen = Statement("I live in Lima."), Statement("My name is Anna and I live in Bergen.")
    assert judge(lima, bergen, hidden="new").verdict is Verdict.REPLACE


def test_the_same_key_replaces_whatever_the_older_text_says() -> None:
    # A key is one subject: the newer value replaces the older whole, as in a key-value store.
    assert verdict("Anna, Oslo, two dogs", "Bergen", old_key="profile", new_key="profile") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A call, a meeting, a channel or a meal joined or left, in the perfect or the past: no job.
        ("I work at Acme", "I've joined the call"),
        ("I work at Acme", "I joined the call"),
        ("I work at Acme", "I have joined the Globex call"),
        ("I work at Acme", "I have joined Globex's Slack"),
        ("I work at Acme", "I've joined a Globex webinar"),
        ("I work at Acme", "I have joined Globex for lunch"),
        ("I work at Acme", "I've joined my wife at Globex for dinner"),
        ("I work at Acme", "I have left Acme's Slack channel"),
        # A job besides the one held.
        ("I work at Acme", "I've started working at Globex on weekends too"),
        ("I work at Acme", "I started working at Globex on the side"),
        # "on and off" is one phrase, not two clauses.
        ("I live in Berlin", "I've been living in Paris on and off"),
        ("I live in Berlin", "I live in Paris on and off"),
        # A return planned, or a home being done up: the move is a stay.
        ("I live in Berlin", "I moved to Paris, I'll be back in Berlin by Christmas"),
        ("I live in Berlin", "I moved to Paris. I'll be back by Christmas."),
        ("I live in Berlin", "I moved to Paris but we plan to move back next year"),
        ("I live in Berlin", "I moved to Paris while my flat is being renovated"),
        ("我住在北京", "我搬到上海，明年就回北京"),
        ("我住在北京", "我搬到上海了，过几个月就回去"),
        ("我住在北京", "我搬到上海了，打算毕业后回北京"),
    ],
)
def test_a_call_joined_a_side_job_or_a_return_planned_hides_nothing(old: str, new: str) -> None:
    assert verdict(old, new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Acme", "I have joined Globex"),
        ("I work at Acme", "I've been working at Globex since May"),
        ("I live in Berlin", "I've moved to Paris"),
        ("I live in Berlin", "I moved to Paris, I'll go back to work on Monday"),
        ("I live in Berlin", "I moved to Paris. My sister will be back in Berlin by Christmas."),
        ("I live in Berlin", "I moved to Paris. Will I be back by Christmas?"),
        ("I live in Berlin", "I moved to Paris. I'll be back in five minutes."),
        ("I live in Berlin", "I moved to Paris. I'll be back later."),
        ("我住在北京", "我搬到上海了，再也不回北京了"),
        ("我住在北京", "我搬到上海了，不会回北京了"),
    ],
)
def test_a_move_with_no_return_planned_still_replaces(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # Back for a visit, an errand, a holiday or now and then: the move stands.
        ("I live in Berlin", "I moved to Paris, I'll be back in Berlin to visit my parents"),
        ("I live in Berlin", "I moved to Paris. We'll come back to visit Berlin at Christmas."),
        ("I live in Berlin", "I moved to Paris; I'll be back for Christmas"),
        ("I live in Berlin", "I moved to Paris, I'll come back for the wedding"),
        ("I live in Berlin", "I moved to Paris, I'll be back in Berlin for a conference next month"),
        ("I live in Berlin", "I moved to Paris. I'll be back in Berlin for a visit in May."),
        ("I live in Berlin", "I moved to Paris, I'll return to Berlin occasionally"),
        ("I live in Berlin", "I moved to Paris. I will be back in Berlin every few months for work."),
        ("I live in Berlin", "We moved to Paris. We'll be back in Berlin often."),
        ("I live in Berlin", "I moved to Paris for good, I'll come back to Berlin for holidays"),
        ("I live in Berlin", "I moved to Paris, I'll be back on Monday to pick up my stuff"),
        ("I live in Berlin", "I moved to Paris. I'll be back next week to get the rest of my things."),
        ("I live in Berlin", "I moved to Paris and I'll be back in Berlin tomorrow for the weekend"),
        ("I live in Berlin", "I moved to Paris, I'll return to work on Monday"),
        ("我住在北京", "我搬到上海了，以后回北京探亲"),
        ("我住在北京", "我搬到上海了，下个月回北京出差"),
        ("我住在北京", "我搬到上海了，以后回去看看"),
        # A company joined in a role, or a job in the evenings after quitting the old one.
        ("I work at Acme", "I joined Slack as an engineer"),
        ("I work at Acme", "I started working at Globex in the evenings after quitting Acme"),
    ],
)
def test_a_move_with_a_visit_back_or_a_job_taken_after_quitting_still_replaces(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I moved to Paris, I'll be back in Berlin next year",
        "I moved to Paris. I'll be back for good in the spring.",
        "I moved to Paris, we'll move back to Berlin after the project ends",
        "我搬到上海了，过几个月就回去",
    ],
)
def test_a_return_to_live_still_reads_the_move_as_a_stay(new: str) -> None:
    old = "我住在北京" if "上海" in new else "I live in Berlin"
    assert verdict(old, new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I joined the Globex all-hands",
        "I left the Acme meeting early",
        "I joined my friend at Globex for coffee",
        "I joined the Globex Slack workspace",
        "I joined Globex for drinks after work",
    ],
)
def test_a_meeting_a_workspace_or_a_coffee_joined_is_no_employer(new: str) -> None:
    assert verdict("I work at Acme", new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I moved to Paris", "I moved back to Berlin"),
        ("I live in Paris", "I've moved back to Berlin"),
        ("I moved to Paris", "We moved back to Berlin last month"),
        ("我搬到上海了", "我搬回北京了"),
        ("我住在上海", "我们搬回到北京了"),
    ],
)
def test_a_move_back_is_a_move_to_the_place_named(old: str, new: str) -> None:
    assert verdict(old, new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I'll be back in Berlin to visit",
        "I moved back the meeting",
        "I moved back the meeting to Friday",
        "I moved the meeting back to Friday",
        "I went back to Berlin for the weekend",
        "I moved back home",
        "I moved back to the office downstairs",
        "I moved back to the old team",
        "I moved back to coffee",
        "I moved back to Windows",
        "我回北京出差",
        "我搬回来了",
        "我搬回家了",
        "我们搬回原来的公司了",
        "我迁回户口了",
    ],
)
def test_a_visit_back_a_meeting_moved_back_or_a_move_back_to_no_named_place_hides_no_home(new: str) -> None:
    old = "我住在上海" if re.search(r"[\u4e00-\u9fff]", new) else "I live in Paris"
    assert verdict(old, new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Acme", "I left Acme's group chat"),
        ("I work at Acme", "I joined Globex's group chat"),
        ("I work at Acme", "I left the Globex group chat"),
        ("我在阿里工作", "我今天加入了腾讯的会议"),
        ("我在阿里工作", "我加入了腾讯的群聊"),
        ("我在阿里工作", "我加入了腾讯的频道"),
    ],
)
def test_a_chat_a_meeting_or_a_channel_joined_or_left_is_no_job_change(old: str, new: str) -> None:
    assert verdict(old, new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "Moved to Paris for work, back in Berlin by March.",
        "Moved to Paris. Back in Berlin by the end of the year.",
        "moved to Paris, back by Christmas",
    ],
)
def test_a_dated_return_said_without_a_subject_reads_the_move_as_a_stay(new: str) -> None:
    assert verdict("I live in Berlin", new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I moved to Paris. Back in 2019 I lived in Rome.",
        "Moved to Paris, back in Berlin for Christmas",
        "Moved to Paris. Back in Berlin now.",
        "Moved to Paris, back in five minutes",
        "I moved to Paris, back pain by the evening",
        "Back by popular demand, I moved to Paris",
    ],
)
def test_back_then_a_visit_or_a_break_without_a_subject_leaves_the_move(new: str) -> None:
    assert verdict("I live in Berlin", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    ["I joined Netflix", "I joined Crunch", "I joined Crunch Fitness", "I've joined Spotify", "I joined Disney+"],
)
def test_a_streaming_service_or_a_gym_joined_by_its_brand_hides_no_employer(new: str) -> None:
    assert verdict("I work at Acme", new) is not Verdict.REPLACE


@pytest.mark.parametrize("new", ["I joined Netflix as an engineer", "I joined Peloton as a designer"])
def test_a_subscription_brand_joined_in_a_role_is_a_new_employer(new: str) -> None:
    assert verdict("I work at Acme", new) is Verdict.REPLACE


@pytest.mark.parametrize("new", ["I joined Netflix as a subscriber", "I joined Twitch as a streamer"])
def test_a_subscription_brand_joined_as_a_member_or_a_creator_is_no_employer(new: str) -> None:
    assert verdict("I work at Acme", new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在上海", "他搬到北京了"),
        ("我住在上海", "他搬回北京了"),
        ("我住在上海", "她去年搬到北京了"),
        ("I live in Paris", "He moved to Berlin"),
        ("I live in Paris", "She moved back to Berlin"),
        ("I work at Acme", "He joined Globex"),
    ],
)
def test_he_or_she_that_opens_a_text_is_someone_unread_not_the_user(old: str, new: str) -> None:
    # No clause before names whom "he" or "他" is; the user is "I" or "the user", so the
    # move is someone else's and the user's home stays.
    assert verdict(old, new) is Verdict.UNRELATED
    assert verdict("用户住在杭州。她在阿里工作", "用户住在上海。她在阿里工作") is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I moved to coffee",
        "I moved to the old team",
        "I moved to a new team",
        "I moved to night shifts",
        "I moved to Windows",
        "I moved to Vim",
        "I moved to Engineering",
        "I moved back to Google Docs",
        "I moved back to VS Code",
        "I moved back to Jira",
        "I moved back to Building 4",
        "I moved back to Python 2",
        "I moved back to Monday",
        "I moved back to Marketing",
    ],
)
def test_a_move_to_a_drink_a_team_a_tool_or_a_day_hides_no_home(new: str) -> None:
    assert verdict("I live in Paris", new) is not Verdict.REPLACE


@pytest.mark.parametrize(
    "new", ["I moved to Berlin", "I moved to the Bay Area", "i moved to berlin", "We moved to New York in May"]
)
def test_a_move_to_a_named_place_still_replaces_the_home(new: str) -> None:
    assert verdict("I live in Paris", new) is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Acme", "I joined Spotify Premium"),
        ("I work at Acme", "I joined Spotify Family"),
        ("I work at Acme", "I joined Netflix Basic"),
        ("我在阿里工作", "我加入了腾讯视频会员"),
        ("我在阿里工作", "我加入了QQ音乐会员"),
    ],
)
def test_a_subscription_plan_or_membership_joined_is_no_employer(old: str, new: str) -> None:
    assert verdict(old, new) is not Verdict.REPLACE
    assert verdict("I work at Acme", "I joined Spotify as a backend engineer") is Verdict.REPLACE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在上海", "我搬回北京三个月，之后再回上海"),
        ("我住在上海", "我搬到北京了，三个月后回上海"),
        ("我住在上海", "我搬到宿舍住了"),
        ("我住在上海", "我搬回宿舍住了"),
        ("I live in Paris", "I moved to the Berlin office"),
        ("I live in Paris", "I moved to the London branch of my firm"),
        ("I work at Acme", "I joined Amazon Prime Video"),
    ],
)
def test_a_return_after_some_months_a_dorm_an_office_or_a_video_plan_hides_nothing(old: str, new: str) -> None:
    assert verdict(old, new) is not Verdict.REPLACE
    assert verdict("我住在上海", "我搬到北京住了") is Verdict.REPLACE


@pytest.mark.parametrize(
    "new",
    [
        "I moved to Berlin 2 weeks ago",
        "I moved to Boston 6 months ago",
        "We moved to Austin 3 years ago",
        "I moved to Dallas 10 days ago",
        "i moved to denver 2 yrs ago",
    ],
)
def test_a_move_dated_by_a_number_after_the_name_replaces_the_home(new: str) -> None:
    # "Building 4", "Plan A" name no home; "Berlin 2 weeks ago" does: the number counts time.
    assert verdict("I live in Paris", new) is Verdict.REPLACE


@pytest.mark.parametrize("new", ["I moved to Building 4", "I moved to Plan B", "I moved to Python 3"])
def test_a_numbered_thing_moved_to_is_still_no_home(new: str) -> None:
    assert verdict("I live in Paris", new) is not Verdict.REPLACE
