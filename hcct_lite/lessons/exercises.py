"""The practice exercises of notebooks 01-05: what each asks, its right answer, its hints.

``hl.check("01.2", answer)`` judges an answer at once, against one computed from the mode's
own data (:mod:`.answers`). Hints teach the method; none states the answer. Notebook 06,
the final assessment, is graded apart (``make grade``): nothing here knows its answers.
"""

from __future__ import annotations

from .answers import ANSWERS, best_epoch_gain, break_even_with
from .checks import Exercise, Verdict, read_answer, verdict
from .modes import current_mode

__all__ = ["EXERCISES", "check"]

_LIST = [
    Exercise(
        "01.1",
        "your alpha (a number, to one decimal)",
        ANSWERS["01.1"],
        decimals=1,
        wrong=(lambda: break_even_with({}, [0], [1]), -1.0),
        hint="The break-even alpha is minus the similarity part over the data part: which "
        "of the two depends on the sample counts? Change client 1's count in a fresh "
        "copy of sizes, so that sizes itself stays as the notebook made it.",
    ),
    Exercise(
        "01.2",
        "your alpha (a number, to one decimal)",
        ANSWERS["01.2"],
        decimals=1,
        wrong=(
            lambda: break_even_with({0: 180, 2: 224}, [0, 1], [2]),
            lambda: break_even_with({}, [0, 1], [2]),
        ),
        hint="Client 3 joins a group: the groups are [0, 1] and [2], with only sizes[2] "
        "changed, to 224, in a fresh copy (sizes.copy()): new = sizes would change "
        "sizes itself, and exercise 1's change would still be in it.",
    ),
    Exercise(
        "01.3",
        "True or False: one pattern is best for every client",
        ANSWERS["01.3"],
        kind="bool",
        wrong=("maybe", 2),
        hint="For each client, find the patterns with its lowest mean error in "
        "pattern_means(results) (keep ties); then look for a pattern on every list.",
    ),
    Exercise(
        "01.4",
        "True or False: clients 1 and 2 end with the same error at every seed in (1,2)",
        ANSWERS["01.4"],
        kind="bool",
        wrong=("same",),
        hint="For each seed's run r in results['(1,2)'], compare "
        "r['final']['client_test_error'][0] with [1]. Sharing a model is not "
        "sharing a test set.",
    ),
    Exercise(
        "01.5",
        'the three pairs in order, e.g. ["(1,3)", "(1,2)", "(2,3)"]',
        ANSWERS["01.5"],
        kind="sequence",
        wrong=(["(1,2)", "(1,3)", "(2,3)"], ["(9,9)"]),
        hint="Swap the first two entries of a copy of sizes, compute the break-even alpha "
        "of each pair with it, and sort the pairs by it, smallest first.",
    ),
    Exercise(
        "02.1",
        "the largest divergence (a number, to three decimals)",
        ANSWERS["02.1"],
        decimals=3,
        wrong=(0.4, 0.1),
        hint="Let the group grow without limit: what is left of its sample-size term, "
        "and what has the client shed? The text under the four lines of 'The two "
        "terms' works this out for a client with 100 samples.",
    ),
    Exercise(
        "02.2",
        "the smallest group size (a whole number)",
        ANSWERS["02.2"],
        kind="integer",
        wrong=(400, 402, 200),
        hint="The gain is the sample term the client sheds (its own minus the group's) "
        "less the divergence it takes on. Find the group size where the two are equal; "
        "a gain of exactly 0 does not lower the bound.",
    ),
    Exercise(
        "02.3",
        "the alpha (a number, to one decimal)",
        ANSWERS["02.3"],
        decimals=1,
        wrong=(1.0, 40.0, 0.0),
        hint="The analogy's alpha is inversely proportional to delta, a probability "
        "below one: where in that range is alpha smallest, and what does the "
        "formula approach there?",
    ),
    Exercise(
        "02.4",
        "the total-variation distance (a number, to two decimals)",
        ANSWERS["02.4"],
        decimals=2,
        wrong=(1.0, 0.0, 0.25),
        hint="Write each client's labels as a distribution over the ten digits, then use "
        "the total-variation distance as the section on the key assumption defines it.",
    ),
    Exercise(
        "02.5",
        "a number of epochs (a whole number)",
        ANSWERS["02.5"],
        kind="integer",
        wrong=(100, 200, 138, 140),
        hint="xi_T is a geometric sum, and the convergence section prints its limit. "
        "Epochs count from t = 1, the first at the rate 0.1, as learning_rate_sum "
        "counts them: find the first T that reaches half the limit, not the last below.",
    ),
    Exercise(
        "03.1",
        "the two clients merged first, e.g. [3, 5] (clients counted from 1)",
        ANSWERS["03.1"],
        kind="set",
        wrong=([1, 3], [99, 98]),
        clients=True,
        hint="Change a copy of sizes (its third entry is client 3), run "
        "hl.merge_steps(updates, new_sizes, alpha=100.0) and read its first step: "
        "which pair now has the largest data part among the similar pairs?",
    ),
    Exercise(
        "03.2",
        "the alpha (a number, to the nearest whole number)",
        ANSWERS["03.2"],
        decimals=0,
        wrong=(1000.0, 10.0),
        hint="Bisect on alpha: client_partition(...).n_groups never grows with alpha, so "
        "halve the interval between an alpha with several groups and one with one "
        "until it is narrower than 1.",
    ),
    Exercise(
        "03.3",
        "the number of seeds (a whole number from 0 to 10)",
        ANSWERS["03.3"],
        kind="integer",
        wrong=(10, 0),
        hint="A draw counts only when no cluster is split and none joined to another. "
        "The partition and the truth list clients in different orders and forms: "
        "compare them as sets of clients, not as lists.",
    ),
    Exercise(
        "03.4",
        '"greedy", "optimum", "both" or "neither"',
        ANSWERS["03.4"],
        kind="choice",
        options=("greedy", "optimum", "both", "neither"),
        wrong=("both",),
        hint="Compare each partition's groups with the true clusters, cluster by cluster.",
    ),
    Exercise(
        "04.1",
        "points below the final epoch (a number, to two decimals)",
        ANSWERS["04.1"],
        decimals=2,
        wrong=(lambda: best_epoch_gain("cifar10", "maxfl"), 0.0),
        hint="Work seed by seed: one mean error per epoch, over that run's clients; keep "
        "the lowest and subtract it from the run's final mean. Then average the "
        "seeds. Each client's own minimum is the other protocol, not this one.",
    ),
    Exercise(
        "04.2",
        "the number of seeds (a whole number)",
        ANSWERS["04.2"],
        kind="integer",
        wrong=(0, -1),
        hint="A seed gives every scheme the same clients, so compare the two schemes "
        "within each seed, never across seeds. Each run records its seed, its scheme "
        "and its final-epoch mean error.",
    ),
    Exercise(
        "04.3",
        "[with buffers, over parameters], two whole numbers",
        ANSWERS["04.3"],
        kind="sequence",
        wrong=([0, 0], [45, 0], [-1, -1]),
        hint="In each matrix, sort the pairs into those within one domain and those across "
        "two (each entry lists its clients' domains), counting each pair once. Find the "
        "least similar pair within a domain, then count the pairs across above it.",
    ),
    Exercise(
        "04.4",
        "the alpha (a number, to the nearest whole number)",
        ANSWERS["04.4"],
        decimals=0,
        wrong=(1.0, 100.0),
        hint="Check the cosine you used: over trainable parameters, not with the buffers, "
        "and within one domain, not across two. Then round the break-even alpha to the "
        "nearest whole number rather than cutting it.",
    ),
    Exercise(
        "05.1",
        "the number of samples (a whole number)",
        ANSWERS["05.1"],
        kind="integer",
        wrong=(lambda: ANSWERS["05.1"]() + 1, 112),
        hint="For two equal clients the break-even alpha is their sample count times a "
        "factor that depends on the cosine alone. Solve for the count; they merge only "
        "while the break-even alpha stays strictly below 50.",
    ),
    Exercise(
        "05.2",
        "groups per epoch (a number, to one decimal)",
        ANSWERS["05.2"],
        decimals=1,
        wrong=(4.0, 16.0),
        hint="A client alone is a group too, and the first epoch, before any merge, says "
        "nothing of HCCT's choices. Look for the number in section 2's summary of the "
        "study, for HCCT with one local epoch.",
    ),
    Exercise(
        "05.3",
        "the cosine (a number, to three decimals)",
        ANSWERS["05.3"],
        decimals=3,
        wrong=(1.0, 0.9),
        hint="Only pairs of clients with different rotations count; a client with itself "
        "is no pair. The buffer study's ablation entry lists each client's rotation "
        "beside its epoch-1 cosines (seed 0), with the buffers in the update.",
    ),
    Exercise(
        "05.4",
        "the alpha (a whole number)",
        ANSWERS["05.4"],
        kind="integer",
        wrong=(1, 1000),
        hint="Choose on the validation federations alone, as section 4's remedy does "
        "with one: the third federation judges the choice and must not steer it.",
    ),
    Exercise(
        "05.5",
        "the alpha (a number, to three decimals)",
        ANSWERS["05.5"],
        decimals=3,
        wrong=(5.0, 5.01, 4.47, 4.9, 10.0),
        hint="A slider step is far too coarse for three decimals. The number of groups "
        "never grows with alpha: narrow an interval from an alpha with three groups to "
        "one with two, on the designer's own partition, as in notebook 3's exercise 2.",
    ),
]

EXERCISES = {ex.key: ex for ex in _LIST}
_RIGHT: dict = {}  # (key, mode) -> the right answer, computed once per kernel


def right_answer(key: str):
    """The right answer of practice exercise ``key`` in the current mode (computed once)."""
    mode = current_mode().name
    if (key, mode) not in _RIGHT:
        _RIGHT[key, mode] = EXERCISES[key].reference()
    return _RIGHT[key, mode]


def _counted_from_zero(ex: Exercise, answer, right) -> bool:
    if not ex.clients:
        return False
    try:
        given = read_answer(ex.kind, answer)
    except ValueError:
        return False
    shifted = [str(int(x) + 1) if x.lstrip("-").isdigit() else x for x in given]
    return sorted(shifted) == sorted(read_answer(ex.kind, right))


def check(key: str, answer) -> Verdict:
    """Judge a student's ``answer`` to practice exercise ``key``; print right, or a hint.

    The right answer is computed from the mode's own data (never from the notebook's
    variables). Any answer is judged or named as unreadable, with what is wanted: a check
    never raises on an answer. ``...`` (the placeholder) says what to fill in. The returned
    :class:`~hcct_lite.lessons.checks.Verdict` is true when right and shows nothing.
    """
    if not isinstance(key, str) or key not in EXERCISES:
        raise ValueError(f"no practice exercise {key!r}; choose from {', '.join(EXERCISES)}")
    ex = EXERCISES[key]
    right = None if answer is Ellipsis else right_answer(key)
    result = verdict(ex, answer, right)
    if not result and answer is not Ellipsis and _counted_from_zero(ex, answer, right):
        result = Verdict(
            False,
            f"Exercise {key}: not yet. Clients are counted from 1 in every "
            "notebook (client 1 is index 0 in Python's lists).",
        )
    print(result.message)
    return result
