"""The federation designer: its logic without widgets, then the widget driven from Python."""

import dataclasses

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from hcct_lite.lessons.designer import (  # noqa: E402
    PRESETS,
    Designer,
    Silo,
    bound_terms,
    check_alpha,
    check_silos,
    label_counts,
    parse_classes,
)


@pytest.fixture(scope="module")
def designer():
    return Designer(seed=0)


def test_classes_parse_ranges_and_lists_and_name_a_bad_part():
    assert parse_classes("0-4") == (0, 1, 2, 3, 4)
    assert parse_classes(" 7, 0-2 ,9") == (0, 1, 2, 7, 9)
    assert parse_classes("") == ()
    with pytest.raises(ValueError, match="'x' is not a digit"):
        parse_classes("1,x")
    with pytest.raises(ValueError, match="'8-12' must lie within 0-9"):
        parse_classes("8-12")


@pytest.mark.parametrize(
    ("silo", "message"),
    [
        (Silo(samples=0), "silo 2 has 0 samples: it needs 2 to 400"),
        (Silo(classes=()), "silo 2's label mix is all zero"),
        (Silo(concentration=0.0), "silo 2's label-mix concentration must be > 0"),
        (Silo(rotation=45), "silo 2's rotation must be one of"),
        (Silo(samples=401), "silo 2 has 401 samples"),
        (Silo(classes=(1, 1, 2)), r"silo 2's classes name \[1\] more than once"),
        (Silo(classes=[0, 1]), "silo 2's classes must be a tuple of digits"),
        (Silo(classes=1.5), "silo 2's classes must be a tuple of digits"),
        (Silo(classes=(1.5, 2)), "silo 2's classes must be digits within 0-9"),
        (Silo(rotation=90.0), r"silo 2's rotation must be one of \(0, 90, 180, 270\); got 90.0"),
        (Silo(concentration="a"), "silo 2's label-mix concentration must be > 0; got 'a'"),
        (Silo(samples=100.0), "silo 2 has 100.0 samples"),
        ("a silo", "silo 2 is a str, not a Silo"),
    ],
)
def test_bad_silos_are_named(silo, message):
    with pytest.raises(ValueError, match=message):
        check_silos([Silo(), silo, Silo()])


def test_federation_size_and_alpha_are_checked():
    with pytest.raises(ValueError, match="3 to 8 silos; got 2"):
        check_silos([Silo(), Silo()])
    for bad in (0, -1, float("nan"), "a"):
        with pytest.raises(ValueError, match="alpha must be a number > 0"):
            check_alpha(bad)
    assert check_alpha("2.5") == 2.5


def test_label_counts_follow_the_mix_and_the_seed():
    silo = Silo(samples=97, concentration=0.2, classes=(1, 3, 5))
    counts = label_counts(silo, 0, 2)
    assert counts.sum() == 97 and counts[[0, 2, 4, 6, 7, 8, 9]].sum() == 0
    assert (label_counts(silo, 0, 2) == counts).all()
    assert not (label_counts(silo, 1, 2) == counts).all()  # another seed, another mix
    even = label_counts(Silo(samples=100, concentration=1e6), 0, 0)
    assert even.min() >= 9 and even.max() <= 11


def test_theorem_terms_alone_and_in_a_group():
    hist = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    terms = bound_terms(hist, [100, 300, 100], [[0, 1], [2]], chosen=0)
    assert terms["alone"] == (pytest.approx(0.4), 0.0)
    sample, tv = terms["group"]
    assert sample == pytest.approx(0.1) and tv == pytest.approx(0.75)  # mix 25 % / 75 %
    assert terms["members"] == [0, 1]


def test_alpha_moves_the_partition_without_retraining(designer):
    silos, _ = PRESETS["rotated pairs"]
    low = designer.picture(silos, 0.1)
    trained = dict(designer._updates)
    high = designer.picture(silos, 1e4)
    assert low["partition"].n_groups == 8 and high["partition"].n_groups == 1
    assert designer._updates == trained  # the same cached updates, nothing retrained
    assert low["hist"].shape == (8, 10) and np.allclose(low["hist"].sum(1), 1)
    assert low["cosines"].shape == (8, 8) and low["text"].startswith("alpha = 0.1: 8 group(s)")


def test_the_chosen_client_must_be_one_of_the_silos(designer):
    silos, alpha = PRESETS["IID clients"]
    for chosen in (1.5, 6, -1):
        with pytest.raises(ValueError, match=f"client {chosen + 1} is not one of the 6 silos"):
            designer.picture(silos, alpha, chosen)


def test_one_changed_silo_retrains_one_silo(designer):
    silos, alpha = PRESETS["rotated pairs"]
    designer.picture(silos, alpha)
    before = len(designer._updates)
    changed = [dataclasses.replace(silos[0], samples=120)] + list(silos[1:])
    designer.picture(changed, alpha)
    assert len(designer._updates) == before + 1


def test_too_many_images_of_one_digit_is_named(designer):
    silos = [Silo(400, classes=(3,))] + [Silo()] * 2
    with pytest.raises(ValueError, match="silo 1 needs 400 images of digit 3; the data has"):
        designer.picture(silos, 10.0)


def test_training_compares_three_patterns_per_silo(designer):
    silos, alpha = PRESETS["motivating example"]
    errors = designer.train(silos, alpha, epochs=2)
    assert list(errors) == ["HCCT's pattern", "independent", "global"]
    assert all(len(v) == 3 and all(0 <= e <= 100 for e in v) for v in errors.values())


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


def test_the_widget_redraws_and_keeps_the_last_picture_on_a_bad_setting():
    from hcct_lite import federation_designer

    box = federation_designer(preset="rotated pairs")
    widgets = list(_walk(box))
    by = {w.description: w for w in widgets if getattr(w, "description", "")}
    text = next(w for w in widgets if "hcct-partition" in w._dom_classes)
    message = next(w for w in widgets if type(w).__name__ == "HTML" and w is not text)
    assert text.value.startswith("alpha = 50: 4 group(s)")
    by["alpha"].value = 0.1
    assert text.value.startswith("alpha = 0.1: 8 group(s)")
    by["silo 1: samples"].value = 0
    assert "silo 1 has 0 samples" in message.value and "last valid picture" in message.value
    assert text.value.startswith("alpha = 0.1: 8 group(s)")  # the last valid picture
    by["silo 1: samples"].value = 200
    assert message.value == ""
    by["preset"].value = "motivating example"
    assert text.value == "alpha = 100: 2 group(s) [[1, 2], [3]]" and by["silos"].value == 3
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        federation_designer(preset="nope")


def test_the_picture_is_readable_projected(designer):
    from matplotlib.text import Text

    from hcct_lite.lessons.modes import classroom_style
    from hcct_lite.viz.designer import draw_designer, draw_training

    classroom_style()  # as every notebook sets it (notebook_mode)
    silos, alpha = PRESETS["rotated pairs"]
    for fig in (
        draw_designer(designer.picture(silos, alpha), chosen=2),
        draw_training({"a": [10.0, 20.0, 30.0], "b": [5.0, 6.0, 7.0]}),
    ):
        fig.canvas.draw()
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert not [t.get_text() for t in texts if t.get_fontsize() < 12]
        width, height = fig.get_size_inches() * fig.dpi
        assert width <= 1024 and height <= 768  # fits a projector, as drawn inline
    matplotlib.pyplot.close("all")


def test_the_static_book_gets_a_picture_and_a_note(monkeypatch, capsys):
    from hcct_lite import federation_designer

    monkeypatch.setenv("HCCT_STATIC_WIDGETS", "1")
    assert federation_designer(preset="IID clients") is None
    assert "Static page" in capsys.readouterr().out
