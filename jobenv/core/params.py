"""click option types for whole numbers and durations, through numparse (click's int() takes
'1_0' and '١٢', float() takes nan, inf and 1e300).  Here, below every package, because click
commands outside jobenv.cli (stage's, selftest's) use them too and must not import the CLI."""
from __future__ import annotations

from typing import Optional

import click

from jobenv.core.errors import JobenvError
from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST, MAX_SECONDS, parse_seconds, parse_uint


class Count(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A whole number option, through numparse.parse_uint (click's int() takes '1_0' and '١٢')."""

    name = "integer"

    def __init__(self, minimum: int = 0, maximum: int = MAX_HOSTS * MAX_PER_HOST) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: object, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> int:
        try:
            return parse_uint(str(value), "the value", self.maximum, self.minimum)
        except JobenvError as exc:
            self.fail(exc.message, param, ctx)


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A duration option, through numparse.parse_seconds (float() takes nan, inf and 1e300)."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0, maximum: float = MAX_SECONDS, above: bool = False) -> None:
        self.minimum, self.maximum, self.above = minimum, maximum, above

    def convert(self, value: object, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        text = f"{value:.10g}" if isinstance(value, (int, float)) else str(value)  # a default
        try:
            return parse_seconds(text, "the value", self.minimum, self.maximum, self.above)
        except JobenvError as exc:
            self.fail(exc.message, param, ctx)
