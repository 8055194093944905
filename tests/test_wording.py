"""The words that follow a count (moa_chat.text.wording): one rule for the command line, the chat and the prompts."""

from moa_chat.text.wording import plural


def test_a_count_names_its_noun_in_the_singular_only_for_one():
    assert plural(1, "reference") == "1 reference"
    assert plural(0, "problem") == "0 problems"
    assert plural(2, "turn") == "2 turns"


def test_a_large_count_is_grouped_and_an_irregular_plural_is_given():
    assert plural(1200, "token") == "1,200 tokens"
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"
