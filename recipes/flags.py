"""argparse types that reject impossible flag values up front, so a typo
gives one `error: argument --epochs: ...` line instead of a traceback from
deep inside Keras or tf.data."""

import argparse


def _number(kind, text):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}; "
            f"got {text!r}"
        ) from None


def at_least(minimum):
    """An int type accepting values >= `minimum`."""

    def parse(text):
        value = _number(int, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be at least {minimum}; got {value}"
            )
        return value

    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)


def rate(text):
    """A float in [0, 1): dropout rates and held-out fractions."""
    value = _number(float, text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(
            f"must be in [0, 1); got {value}"
        )
    return value


def positive_float(text):
    value = _number(float, text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {value}")
    return value
