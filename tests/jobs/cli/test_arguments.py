"""The CLI's argument types (jobs/cli/arguments.py): pure validators."""

from __future__ import annotations

import argparse

import pytest

from jobs.cli.arguments import nonnegative_int, positive_int, whole_number


def test_whole_numbers_and_their_least_value():
    assert positive_int("1") == 1 and nonnegative_int("0") == 0 and whole_number(5)("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be >= 1, got 0$"):
        positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be >= 0, got -3$"):
        nonnegative_int("-3")


@pytest.mark.parametrize("text", ["1.5", "", "ten", "9" * 5000, "1e3"])
def test_what_is_not_a_whole_number_is_named_briefly(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be a whole number, got ") as exc:
        positive_int(text)
    assert len(str(exc.value)) < 90


def test_a_long_negative_number_is_cut_in_the_message():
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be >= 1, got -0{39}$"):
        positive_int("-" + "0" * 4000 + "1")
