"""argparse types the examples share."""

import argparse


def positive_int(text):
    """A whole number >= 1: a count of steps, ranks or batches, or an interval (0 would divide by zero)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value
