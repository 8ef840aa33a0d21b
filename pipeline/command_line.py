"""One way to declare a command line, for each of the project's tools.

A tool declares its flags as fields of frozen dataclasses made with `flag()`,
each field in a section of --help; `build_parser` makes the argparse parser
from the fields, and `run_command` runs the tool, turning every error the user
can fix into one line and exit code 2 (1 for a run that failed once started).
The same declaration serves --help, parsing and the tool's config, so a flag
is written once. No Beam here: `inspect-pretraining-data` runs without it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import inspect
import logging
import sys
from typing import AbstractSet, Any, Callable, ClassVar, Iterator, NoReturn, Sequence, TypeVar

from bert_pretraining_data.pipeline.beam_options import ConfigError, split_known_args

_VALUE_TYPES = {"int": int, "float": float}
# Where Beam logs a DoFn's failure: in process, and relayed from workers.
BEAM_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service")
Result = TypeVar("Result")
ToolConfig = TypeVar("ToolConfig")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a field is spelled on the command line. The parser reads the value
    as the field's annotation says: int, float, str, or a boolean the absl way."""

    help: str  # what it does; --help adds the default
    choices: Sequence[str] | None = None
    type: Callable[[str], object] | None = None  # a conversion other than the annotation's
    # A boolean of an absl script (the original's, ALBERT's, the Model Garden's):
    # also spelled --noNAME, as absl spells false.
    absl: bool = False
    parser_default: object = None  # see flag()
    default_help: str | None = None  # the default in words, when other flags decide it
    hidden: bool = False  # left out of --help
    positional: bool = False  # an argument without --, e.g. inspect's dataset


def flag(help: str, *, default: object = dataclasses.MISSING,
         parser_default: object = dataclasses.MISSING, **spec: Any) -> Any:
    """A dataclass field that is a flag.

    Args:
        help, spec: the `Flag` fields.
        default: the field's value when the flag is not given; left out for a
            value that the tool derives from other flags (say how in
            `default_help`).
        parser_default: the parser's default if not `default` (or None when
            that is left out): None for a flag that the tool must see unset,
            as it applies only with another flag.
    """
    if parser_default is dataclasses.MISSING:
        parser_default = None if default is dataclasses.MISSING else default
    return dataclasses.field(default=default, metadata={
        "flag": Flag(help, parser_default=parser_default, **spec)})


Check = tuple[bool, str]  # (holds, the one-line error when it does not)


class FlagGroup:
    """A section of --help: the flags a dataclass subclass declares as its
    fields, what decides their defaults and what checks them, together (as
    Beam's `*Options` classes each add their arguments and validate them), so
    that a feature's flags are one group. A group's defaults and checks may
    read other groups' flags (the config is all of them)."""

    SECTION: ClassVar[tuple[str, str]]  # (name, what its flags are for)
    # Dataclasses of flags shown in this section that are not fields of the
    # config: other tools' spellings of one of its flags.
    SPELLINGS: ClassVar[tuple[type, ...]] = ()

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        """The defaults of this group's flags that other flags (or the runner) decide."""
        return {}

    @classmethod
    def spelled(cls, args: argparse.Namespace) -> dict[str, Any]:
        """This group's values as other spellings (`SPELLINGS`) of them set them."""
        return {}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        """What must hold of the validated config, given flags `given`; the
        first that does not is the error."""
        return []


def flag_fields(*declarations: type) -> list[dataclasses.Field]:
    """The flag fields that these dataclasses declare themselves, in order."""
    fields = []
    for declaration in declarations:
        own = inspect.get_annotations(declaration)
        fields += [field for field in dataclasses.fields(declaration)
                   if "flag" in field.metadata and field.name in own]
    return fields


def parse_bool(text: str) -> bool:
    """A boolean flag's value as absl reads it (true/false, t/f, 1/0, yes/no, any case)."""
    lowered = text.lower()
    if lowered in ("true", "t", "1", "yes"):
        return True
    if lowered in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one-line ConfigErrors, not usage and exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_parser(*, prog: str, description: str, groups: Sequence[type[FlagGroup]],
                 usage: str | None = None, add_help: bool = True) -> OneLineParser:
    """The parser of a tool whose flags the `groups` declare, a --help section each."""
    parser = OneLineParser(prog=prog, usage=usage, description=description,
                           allow_abbrev=False, add_help=add_help)
    for group in groups:
        section = parser.add_argument_group(*group.SECTION)
        for field in flag_fields(group, *group.SPELLINGS):
            _add_flag(section, field)
    return parser


def _add_flag(group: argparse._ArgumentGroup, field: dataclasses.Field) -> None:
    """Registers one field's flag (and its absl --noNAME spelling) in its group."""
    spec: Flag = field.metadata["flag"]
    default = spec.parser_default
    kind = str(field.type).split(" | ")[0]  # the annotation: int, str, ...
    help = argparse.SUPPRESS if spec.hidden else (
        f"{spec.help} (default: {_default_help(field)})".replace("%", "%%"))
    if spec.positional:
        group.add_argument(field.name, help=spec.help)
    elif kind == "bool":
        group.add_argument(f"--{field.name}", type=parse_bool, nargs="?", const=True,
                           default=default, metavar="true|false", help=help)
        if spec.absl:
            group.add_argument(f"--no{field.name}", dest=field.name, action="store_false",
                               default=default, help=argparse.SUPPRESS)
    else:
        group.add_argument(f"--{field.name}", type=spec.type or _VALUE_TYPES.get(kind),
                           choices=spec.choices, default=default, help=help)


def _default_help(field: dataclasses.Field) -> str:
    """A flag's default as --help states it."""
    spec: Flag = field.metadata["flag"]
    value = spec.parser_default if field.default is dataclasses.MISSING else field.default
    if spec.default_help:
        text = spec.default_help
    elif value is None or isinstance(value, bool):
        text = str(value).lower()  # none, true, false
    else:
        text = str(value)
    return f"{text}; --no{field.name} for false" if spec.absl else text


def parse_config(parser: OneLineParser, config_type: Callable[..., ToolConfig],
                 groups: Sequence[type[FlagGroup]], argv: Sequence[str],
                 rules: Sequence[Callable[[Any], list[Check]]] = ()
                 ) -> tuple[ToolConfig, list[str]]:
    """A tool's config from its command line, checked, and the flags left for Beam.

    A flag not given takes its field's default, or the one its group derives
    from other flags (`defaults`); another tool's spelling sets it too
    (`spelled`); the first check of the groups, in order, then of the `rules`
    between groups, that does not hold is the ConfigError.
    """
    args, beam_args = split_known_args(parser, argv)
    given = {field.name: getattr(args, field.name) for field in flag_fields(*groups)
             if getattr(args, field.name) is not None}
    values: dict[str, Any] = {}
    for group in groups:
        values.update(group.defaults(args, beam_args))
    values.update(given)
    for group in groups:
        values.update(group.spelled(args))
    config = config_type(**values)
    check(config, groups, given.keys(), rules)
    return config, beam_args


def check(config: object, groups: Sequence[type[FlagGroup]],
          given: AbstractSet[str] = frozenset(),
          rules: Sequence[Callable[[Any], list[Check]]] = ()) -> None:
    """Raises the ConfigError of the first check of `groups`, in order, then
    of `rules`, that does not hold of `config`; `given`: the flags given on
    the command line."""
    checks = [functools.partial(group.checks, config, given) for group in groups]
    for checks_of in checks + [functools.partial(rule, config) for rule in rules]:
        for ok, message in checks_of():  # a group's checks may read what earlier ones checked
            if not ok:
                raise ConfigError(message)


class _Quiet(logging.Filter):
    """Drops the runner's logged tracebacks of the errors a tool reports in one line."""

    def __init__(self, reported: Callable[[BaseException | str], bool]):
        super().__init__()
        self.reported = reported

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            return not self.reported(record.exc_info[1])
        return not self.reported(record.getMessage())


@contextlib.contextmanager
def quiet_beam_logs(reported: Callable[[BaseException | str], bool]) -> Iterator[None]:
    """While it lasts, Beam's loggers drop the records of a failure that
    `reported` says the tool reports itself: an exception raised in this
    process, or a worker's relayed as the text of its message."""
    quiet = _Quiet(reported)
    for name in BEAM_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name in BEAM_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)


def run_command(prog: str, entry: Callable[[Sequence[str]], Result],
                report: Callable[[Result], None], argv: Sequence[str] | None, *,
                user_errors: tuple[type[Exception], ...] = (),
                failed_runs: tuple[type[Exception], ...] = (),
                every_failure_said: bool = False) -> None:
    """Runs a tool's `entry` on its arguments and `report`s the result.

    A ConfigError or one of `user_errors` (input, vocabulary or learning the
    user can fix) ends the tool with its one line and exit code 2, a
    `failed_runs` error with its line and exit code 1; Beam's logged traceback
    of either is dropped, since the line says it all, and of any failure where
    `entry` makes every failure of its pipeline one of them
    (`every_failure_said`: pipeline.prepare.run_to_completion).
    """
    one_line = (ConfigError, *user_errors, *failed_runs)
    try:
        with quiet_beam_logs(lambda err: isinstance(err, one_line) or every_failure_said and (
                isinstance(err, BaseException) or "Traceback" in err)):
            result = entry(sys.argv[1:] if argv is None else argv)
    except (ConfigError, *user_errors) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        sys.exit(2)
    except failed_runs as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        sys.exit(1)
    report(result)
