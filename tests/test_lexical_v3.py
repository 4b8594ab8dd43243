"""lexical-v3, the offline default judge: a sentence copied from a passage is supported, polarity is read
in its own sentence, lexical negation ("abolished", "waived") is negation. The reported reproductions,
a property over generated passages, and v2 kept as it was."""

from __future__ import annotations

from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_crucible.judge.lexical_v2 import LexicalJudgeV2
from pytest_crucible.judge.lexical_v3 import LexicalJudgeV3, with_lexical_negation
from pytest_crucible.judge.select import make_judge
from pytest_crucible.judge.types import ClaimsRequest, CorrectnessRequest, EntailmentRequest

V3 = LexicalJudgeV3()


def supported(context: str | tuple[str, ...], *claims: str, judge=V3) -> list[bool]:
    passages = (context,) if isinstance(context, str) else context
    return judge._entailment(EntailmentRequest(context=passages, claims=claims)).supported


# -- the reproductions ---------------------------------------------------------------------------------
REQUESTS = "Items the libraries do not own can be requested. Each request costs 20 kroner, charged when the item arrives."
CARDS = ("Library cards are free for residents of Vellmark. Non-residents pay 100 kroner a year. Students enrolled at "
         "Vellmark University get a resident card regardless of where they live.")


def test_the_negation_of_a_neighbouring_sentence_does_not_flip_a_copied_claim() -> None:
    claim = "Each request costs 20 kroner, charged when the item arrives."
    assert supported(REQUESTS, claim) == [True]
    assert supported(REQUESTS, claim, judge=LexicalJudgeV2()) == [False]  # the reported verdict, kept in v2
    assert supported(REQUESTS, "Each request does not cost 20 kroner, charged when the item arrives.") == [False]


def test_a_non_word_of_another_sentence_does_not_flip_a_copied_claim() -> None:
    claim = "Students enrolled at Vellmark University get a resident card regardless of where they live."
    assert supported(CARDS, claim) == [True]
    assert supported(CARDS, "Students enrolled at Vellmark University do not get a resident card.") == [False]


def test_abolished_means_no() -> None:
    request = CorrectnessRequest(question="Does Vellmark charge late fees on children's materials?",
                                 answer="Vellmark abolished late fees for children's materials in 2021.",
                                 assertions=("no late fees",))
    verdict = V3._correctness(request)
    assert verdict.grade == "perfect", verdict.reason
    assert LexicalJudgeV2()._correctness(request).grade == "incorrect"  # v2 read "abolished" as a plain verb
    # The answer states the assertion (the answer layer's assertion check is an entailment against the answer).
    assert supported("Vellmark abolished late fees for children's materials in 2021.", "There are no late fees.") == [True]
    # ... and a fee that was kept is still the opposite of "no late fees".
    kept = V3._correctness(request.model_copy(update={"answer": "Vellmark kept late fees for children's materials."}))
    assert kept.grade != "perfect"


def test_waived_and_lacks_read_as_negation_on_both_sides() -> None:
    assert supported("The delivery fee is waived for members.", "Members pay no delivery fee.") == [True]
    assert supported("The delivery fee is charged to members.", "Members pay no delivery fee.") == [False]
    assert with_lexical_negation("The room lacks a kettle.") == "The room lacks not a kettle."
    assert supported("Guests can host a friend for up to 2 hours free.", "You can host a friend free of charge.") == [True]


def test_a_reference_found_almost_word_for_word_in_the_top_chunk_is_recalled() -> None:
    chunk = ("Overdue fines were abolished on January 1, 2023. Items more than 45 days overdue are treated as lost and "
             "the replacement cost is charged to the account.")
    reference = "Items more than 45 days overdue are treated as lost, and the replacement cost is charged to your account."
    claims = V3._claims(ClaimsRequest(question="What happens to very late items?", text=reference)).claims
    assert claims and supported((chunk, "Opening hours are 9 to 5."), *claims) == [True] * len(claims)


def test_the_offline_default_is_v3_and_the_earlier_judges_stay_selectable() -> None:
    assert make_judge("lexical").model == "lexical-v3"
    assert make_judge("lexical-v3").model == "lexical-v3"
    assert make_judge("lexical-v2").model == "lexical-v2"
    assert make_judge("lexical-v1").model == "lexical-v1"


# -- the property: a copied sentence is supported, the same sentence flipped is not ------------------------
SUBJECTS = ["Members", "Students", "Visitors", "Residents", "Staff", "Children", "Guests", "Owners"]
MODALS = ["can", "may", "must", "will"]
# No verb shares a stem with an object: "Students can not book books" holds no word that "Students can not
# borrow books" lacks, and a judge of words cannot tell them apart (a known limit, not a neighbour's negation).
VERBS = ["borrow", "renew", "return", "reserve", "collect", "rent", "cancel", "transfer"]
OBJECTS = ["books", "laptops", "films", "rooms", "tickets", "bikes", "lockers", "passes"]
TAILS = ["", " within 14 days", " for 20 kroner", " once a year", " at the front desk", " before 18:00",
         " on Mondays", " for up to 3 hours"]
# What the other sentences of a passage may carry: negations, numbers, "non-" words.
NOISE = ["Non-residents pay 100 kroner a year.", "Items the library does not own cannot be renewed.",
         "The desk is never open on Sundays.", "No refunds are given after 30 days.",
         "Non-members are welcome at 9 am.", "A late fee of 5 kroner applies per day."]


@st.composite
def sentences(draw):
    subject, verb, obj = draw(st.sampled_from(SUBJECTS)), draw(st.sampled_from(VERBS)), draw(st.sampled_from(OBJECTS))
    return subject, draw(st.sampled_from(MODALS)), verb, obj, draw(st.sampled_from(TAILS)), draw(st.booleans())


def text(sentence, *, flip: bool = False) -> str:
    subject, modal, verb, obj, tail, negated = sentence
    negated = negated != flip
    return f"{subject} {modal}{' not' if negated else ''} {verb} {obj}{tail}."


@st.composite
def passages(draw):
    # Distinct subject+verb+object, so that no other sentence says the flipped one.
    facts = draw(st.lists(sentences(), min_size=1, max_size=4, unique_by=lambda s: (s[0], s[2], s[3])))
    noise = draw(st.lists(st.sampled_from(NOISE), min_size=1, max_size=3, unique=True))
    order = draw(st.permutations([text(fact) for fact in facts] + noise))
    return facts, " ".join(order)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passages(), st.integers(min_value=0, max_value=3))
def test_every_copied_sentence_is_supported_and_its_flip_is_not(case, start) -> None:
    facts, passage = case
    for fact in facts:
        assert supported(passage, text(fact)) == [True], (passage, text(fact))
        assert supported(passage, text(fact, flip=True)) == [False], (passage, text(fact, flip=True))
    # As part of a multi-sentence answer: every claim the judge reads from it is supported.
    chosen = [text(fact) for fact in facts[start % len(facts):]] or [text(facts[0])]
    answer = " ".join(chosen)
    claims = V3._claims(ClaimsRequest(question="What are the rules?", text=answer)).claims
    assert claims and supported(passage, *claims) == [True] * len(claims), (passage, claims)


# -- agreement with the human labels (docs/judge-calibration.md prints these rows) -------------------------
FIGURES = {("lexical-v3", "dev"): (0.71, 0.77, 0.55), ("lexical-v3", "test"): (0.69, 0.73, 0.25)}


def test_agreement_with_the_calibration_set_is_what_the_docs_say() -> None:
    from pathlib import Path

    from pytest_crucible.judge.embed import HashingEmbedder
    from pytest_crucible.judge.engine import JudgeEngine
    from pytest_crucible.labels.calibration import calibration_figures, judge_cases, read_labels_file

    root = Path(__file__).parents[1]
    docs = (root / "docs" / "judge-calibration.md").read_text()
    for (judge, half), expected in FIGURES.items():
        cases = read_labels_file(root / "tests" / "data" / "calibration" / f"labels_{half}.jsonl")
        figures = calibration_figures(cases, judge_cases(cases, JudgeEngine(make_judge(judge)), HashingEmbedder()))
        measured = (round(figures["crag"]["kappa"], 2), round(figures["crag"]["kappaBinary"], 2),
                    round(figures["faithful"]["kappa"], 2))
        assert measured == expected, (judge, half)
        assert f"| {judge} | {half} | {measured[0]:.2f} | {measured[1]:.2f} | {measured[2]:.2f} |" in docs
