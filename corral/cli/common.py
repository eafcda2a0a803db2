"""What every gnt-* command shares: options, the master connection, jobs."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable, Sequence

from corral import constants as C
from corral import errors
from corral import paths as P
from corral.cli.errors_fmt import JobSubmitted, UsageError, format_error
from corral.luxi.client import Client

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any, NoReturn

Handler = Callable[[argparse.Namespace], int | None]


# Connection
def cluster_root() -> str:
    """This machine's root directory; refuses a root without a cluster (exit code 5)."""
    root = P.root_from_env()
    held = (P.below(root, P.CONFIG_DB), P.below(root, P.STORE_HOME))  # a candidate's
    if not any(os.path.exists(path) for path in held):
        raise errors.NotClusterError(
            f"Cluster not initialized or this machine is not part of a cluster"
            f" (no configuration under {root}); run 'gnt-cluster init' first"
        )
    return root


def get_client() -> Client:
    root = cluster_root()
    socket_path = P.below(root, P.MASTER_SOCKET)
    if not os.path.exists(socket_path):
        master = read_ssconf(root, "master_node")
        raise errors.NoMasterError(
            f"Cannot communicate with the master daemon (no socket at {socket_path});"
            f" the master node is {master or 'unknown'}."
        )
    return Client(socket_path)


def read_ssconf(root: str, key: str) -> str | None:
    """The ssconf value ``key`` of the cluster under ``root``, None when unreadable."""
    try:
        with open(P.below(root, P.ssconf_name(key))) as file:
            return file.read().strip()
    except OSError:
        return None


# Options
def add_submit_options(parser: argparse.ArgumentParser, *, dry_run: bool = True) -> None:
    parser.add_argument(
        "--submit", action="store_true", help="Submit the job and return its id without waiting"
    )
    parser.add_argument(
        "--print-jobid", action="store_true", help="Print the job id on standard output"
    )
    add_priority_option(parser)
    parser.add_argument("--reason", help="The reason for executing the command")
    if dry_run:
        parser.add_argument(
            "--dry-run", action="store_true", help="Only check the parameters, do not execute"
        )


def add_priority_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--priority", choices=sorted(C.PRIORITY_NAMES), help="Priority for opcode processing"
    )


def add_list_options(parser: argparse.ArgumentParser, *, verbose: bool = True) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument("--separator", help="Separator between output fields")
    parser.add_argument(
        "-o",
        "--output",
        dest="output",
        help="Comma-separated list of output fields; '+f' adds to the default",
    )
    if verbose:
        parser.add_argument("-v", "--verbose", action="store_true", help="Verbose output")


def add_args(
    parser: argparse.ArgumentParser, dest: str, metavar: str, low: int, high: int | None
) -> None:
    """The command's positional arguments: ``low`` to ``high`` (None: any number)
    of them, counted as Ganeti counts them, with its error texts (``run``)."""
    parser.add_argument(dest, nargs="*", metavar=metavar)
    parser.set_defaults(argspec=(dest, low, high))


def _check_arg_count(opts: argparse.Namespace) -> str | None:
    """Ganeti's message for a wrong number of positional arguments, if any."""
    dest, low, high = opts.argspec
    count, name = len(getattr(opts, dest)), opts.command_name
    if high == 0 and count:
        return f"Error: Command {name} expects no arguments"
    if high is not None and low == high and count != low:
        return f"Error: Command {name} expects {low} argument(s)"
    if high is not None and count > high:
        return f"Error: Command {name} expects only {high} argument(s)"
    if count < low:
        return f"Error: Command {name} expects at least {low} argument(s)"
    return None


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--force", action="store_true", help="Do not ask for confirmation")


def common_op_fields(opts: argparse.Namespace) -> dict[str, Any]:
    """The common opcode fields set from the options, as Ganeti's commands set
    them: the debug level, dry run, priority, and a reason trail naming the
    user's reason (if any) and the command."""
    fields: dict[str, Any] = {"debug_level": int(getattr(opts, "debug", 0) or 0)}
    if hasattr(opts, "dry_run"):
        fields["dry_run"] = bool(opts.dry_run)
    if getattr(opts, "priority", None):
        fields["priority"] = C.PRIORITY_NAMES[opts.priority]
    trail = []
    if getattr(opts, "reason", None):
        trail.append(["gnt:user", opts.reason, time.time_ns()])
    if getattr(opts, "program", None) and getattr(opts, "invoked_as", None):
        trail.append([f"gnt:client:{opts.program}", opts.invoked_as, time.time_ns()])
    if trail:
        fields["reason"] = trail
    return fields


def output_fields(opts: argparse.Namespace, default: Sequence[str]) -> list[str]:
    text = str(opts.output or "")
    if not text:
        return list(default)
    if text.startswith("+"):
        return [*default, *text[1:].split(",")]
    return text.split(",")


# Jobs
def safe_encode(text: str) -> str:
    """Ganeti's SafeEncode: ASCII, with control characters escaped (its quirk
    of writing a carriage return as ``\\'r`` included)."""
    out = []
    for char in text.encode("ascii", "backslashreplace").decode("ascii"):
        code = ord(char)
        if char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\'r")
        elif code < 32 or code >= 127:
            out.append(f"\\x{code & 0xFF:02x}")
        else:
            out.append(char)
    return "".join(out)


def format_log_message(kind: str, message: Any) -> str:
    """A job log message as Ganeti shows it (other kinds than "message" as text)."""
    return safe_encode(
        message if kind == C.ELOG_MESSAGE and isinstance(message, str) else str(message)
    )


def print_feedback(entry: Sequence[Any]) -> None:
    _serial, timestamp, kind, message = entry
    seconds = timestamp[0] + timestamp[1] / 1e6 if timestamp else time.time()
    print(f"{time.ctime(seconds)} {format_log_message(kind, message)}", flush=True)


def poll_job(
    client: Client, job_id: int, feedback: Callable[[Sequence[Any]], None] | None = print_feedback
) -> Any:
    """Wait for a job, showing its log; return the first opcode results or raise."""
    prev_info: Any = None
    prev_serial: int | None = None
    status: str | None = None
    reported: set[str] = set()
    while True:
        result = client.wait_for_job_change(
            job_id, ["status"], prev_info, prev_serial or 0, C.DEFAULT_WFJC_TIMEOUT
        )
        if result is None:
            raise errors.JobLost(f"Job with id {job_id} lost")
        if result == "nochange":
            _report_unchanged(job_id, status, reported)
            continue
        info, entries = result
        (status,) = info
        for entry in entries:
            if feedback is not None:
                feedback(entry)
            prev_serial = max(prev_serial or 0, entry[0])
        if not entries and status in C.JOB_STATUS_FINALIZED | {C.JOB_STATUS_CANCELING}:
            break
        prev_info = info
    return job_results(client, job_id)


def _report_unchanged(job_id: int, status: str | None, reported: set[str]) -> None:
    """Say once why a job has not changed for a whole wait (as Ganeti's tools)."""
    if status not in (C.JOB_STATUS_QUEUED, C.JOB_STATUS_WAITING) or status in reported:
        return
    reported.add(status)
    text = (
        "is waiting in queue"
        if status == C.JOB_STATUS_QUEUED
        else "is trying to acquire all necessary locks"
    )
    print(f"Job {job_id} {text}", file=sys.stderr, flush=True)


def job_results(client: Client, job_id: int) -> list[Any]:
    """The opcode results of a finished job, or its error raised."""
    rows = client.query_jobs([job_id], ["status", "opstatus", "opresult"])
    status, opstatus, opresult = rows[0]
    if status is None:
        raise errors.JobLost(f"Job with id {job_id} lost")
    if status == C.JOB_STATUS_SUCCESS:
        return list(opresult)
    if status in (C.JOB_STATUS_CANCELING, C.JOB_STATUS_CANCELED):
        raise errors.GenericError("Job was canceled")
    for index, (op_status, result) in enumerate(zip(opstatus, opresult, strict=True)):
        if op_status == C.OP_STATUS_ERROR:
            err = errors.decode_exception(result)
            if index > 0 and not isinstance(err, errors.GenericError | errors.RemoteError):
                raise errors.OpExecError(f"partial failure (opcode {index}): {err}")
            raise err
    raise errors.OpExecError(str(opresult))


def submit_or_send(
    opts: argparse.Namespace, op: dict[str, Any], client: Client | None = None
) -> Any:
    """Submit one opcode as a job; wait for it unless --submit was given."""
    op = {**common_op_fields(opts), **op}
    client = client or get_client()
    job_id = client.submit_job([op])
    if getattr(opts, "print_jobid", False):
        print(job_id, flush=True)
    if getattr(opts, "submit", False):
        raise JobSubmitted(job_id)
    return poll_job(client, job_id)[0]


# Entry point
def _terminal_columns() -> int:
    """The terminal's width, found as ``shutil.get_terminal_size()`` finds it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, sized without importing shutil.

    argparse makes a formatter for every argument added, and its default one
    imports shutil (and with it bz2, lzma and zlib) for the terminal's width:
    a few milliseconds of every command's start-up.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _terminal_columns() - 2  # as argparse does with the width it finds
        super().__init__(prog, indent_increment, max_help_position, width)


class Parser(argparse.ArgumentParser):
    """argparse with Ganeti's exit codes for usage errors."""

    # A command's parser: no option after its first argument (as Ganeti's).
    options_first = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        self._first = "-"  # the first argument parsed: a command, or an option

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"Error: {message}", file=sys.stderr)
        # A bad option of a command exits 2 (optparse's code, as Ganeti's tools);
        # an unknown command exits 1.  argparse reports a command's unknown
        # options from the top parser, as arguments it did not recognise.
        after_command = not self._first.startswith("-")
        bad_option = self.options_first or (
            after_command and message.startswith("unrecognized arguments")
        )
        sys.exit(2 if bad_option else C.EXIT_FAILURE)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = sys.argv[1:] if args is None else list(args)
        self._first = args[0] if args else "-"
        return super().parse_known_args(self._optparse_values(args), namespace)

    def _optparse_values(self, args: list[str]) -> list[str]:
        """optparse's rules, which Ganeti's commands follow: an option that takes
        a value takes the next argument even if it starts with ``-`` (``-O -key``),
        and (in a command's parser) options end at the first argument."""
        out: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--" or (self.options_first and not arg.startswith("-")):
                out += ["--", *args[i + (arg == "--") :]]
                break
            action = self._option_string_actions.get(arg)
            if (
                isinstance(action, argparse._StoreAction | argparse._AppendAction)
                and action.nargs is None
                and i + 1 < len(args)
            ):
                out.append(f"{arg}={args[i + 1]}")
                i += 2
                continue
            out.append(arg)
            i += 1
        return out


def make_parser(prog: str, description: str) -> tuple[Parser, Any]:
    parser = Parser(prog=prog, description=description)
    parser.add_argument(
        "--version", action="version", version=f"{prog} (corral {_version()}) {_version()}"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    return parser, subparsers


def _version() -> str:
    from corral import __version__

    return __version__


class _Only:
    """The one command a parser is being built for (see ``run``), if known."""

    command: str | None = None
    found = False


class _SkippedCommand(Parser):
    """Stands in for the parser of a command that will not run: builds nothing.

    Building every command's argparse parser costs a gnt-* command about as
    much as its imports; only the command given on the command line is built.
    """

    def __init__(self) -> None:  # no argparse set-up at all
        pass

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self

    def set_defaults(self, **kwargs: Any) -> None:
        pass


def add_command(
    subparsers: Any, name: str, handler: Handler, help_text: str, aliases: Sequence[str] = ()
) -> argparse.ArgumentParser:
    if _Only.command is not None:
        if _Only.command != name and _Only.command not in aliases:
            return _SkippedCommand()
        _Only.found = True
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text, aliases=list(aliases)
    )
    parser.add_argument("-d", "--debug", action="count", default=0, help="Debug output")
    parser.set_defaults(handler=handler, command_name=name, argspec=None)
    if isinstance(parser, Parser):
        parser.options_first = True
    return parser


def add_not_built(subparsers: Any, prog: str, names: Sequence[str]) -> None:
    """Ganeti's commands that Corral does not have yet: each takes any arguments
    and says that it is not built, rather than being an unknown command."""

    def not_built(opts: argparse.Namespace) -> int:
        print(f"Failure: '{prog} {opts.command_name}' is not built in Corral yet", file=sys.stderr)
        return C.EXIT_FAILURE

    for name in names:
        if _Only.command is not None:
            if _Only.command != name:
                continue
            _Only.found = True
        # No option prefix: every argument, options included, is taken as is.
        parser = subparsers.add_parser(name, help="Not built in Corral yet", prefix_chars="\0")
        parser.add_argument("args", nargs=argparse.REMAINDER)
        parser.set_defaults(handler=not_built, command_name=name, argspec=None)


def entry_points(
    build: Callable[[], Parser],
) -> tuple[Callable[[list[str] | None], int], Callable[[], None]]:
    """``(main, cli)`` of a command: ``main(argv)`` returns the exit code (for
    embedding), ``cli()`` is the console script and leaves the process."""

    def main(argv: list[str] | None = None) -> int:
        return run(build, argv)

    def cli() -> None:
        exit_now(main())

    return main, cli


def exit_now(rc: int) -> NoReturn:
    """Flush and leave without tearing the interpreter down.

    Freeing a large query result at exit costs a listing ~5 ms; the commands
    hold no resources that need more than the flush.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        rc = rc or 0
    os._exit(rc)


def run(parser: Parser | Callable[[], Parser], argv: Sequence[str] | None = None) -> int:
    """Parse, run the chosen command, turn errors into Ganeti's texts and codes.

    ``parser`` is the parser or, better, the function that builds it: then
    only the chosen command's part is built.
    """
    if not isinstance(parser, argparse.ArgumentParser):
        parser = _build_for(parser, sys.argv[1:] if argv is None else argv)
    try:
        opts = parser.parse_args(argv)
    except errors.GenericError as err:  # an option's value refused by its type
        rc, text = format_error(err)
        print(text, file=sys.stderr)
        return rc
    words = [arg for arg in (sys.argv[1:] if argv is None else argv) if not arg.startswith("-")]
    opts.program, opts.invoked_as = parser.prog, words[0] if words else None
    # The modules and the parser live until the command exits: keep them out of
    # the cyclic collector's way (while a big answer is decoded, and at exit).
    gc.freeze()
    if getattr(opts, "handler", None) is None:
        parser.print_usage(sys.stderr)
        return C.EXIT_FAILURE
    if opts.argspec is not None:
        problem = _check_arg_count(opts)
        if problem is not None:
            print(problem, file=sys.stderr)
            return C.EXIT_FAILURE
    try:
        rc = opts.handler(opts)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (e.g. head) went away: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return C.EXIT_SUCCESS
    except KeyboardInterrupt:
        print(
            "Aborted. Note that if the operation created any jobs, they might have been"
            " submitted and will continue to run in the background.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    except (errors.GenericError, JobSubmitted, UsageError, Exception) as err:
        if getattr(opts, "debug", 0) and not isinstance(err, JobSubmitted):
            import traceback

            traceback.print_exc()
        rc, text = format_error(err)
        print(text, file=sys.stderr)
        return rc
    return C.EXIT_SUCCESS if rc is None else rc


def _build_for(build: Callable[[], Parser], argv: Sequence[str]) -> Parser:
    """The parser for the command named in ``argv`` alone, or the full one.

    The command is the first word that is not an option (the gnt-* commands
    have no option taking a value before it).  Without one, or with an
    unknown one, the full parser is built, for the help and error texts.
    """
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command is not None:
        _Only.command, _Only.found = command, False
        try:
            parser = build()
        finally:
            _Only.command = None
        if _Only.found:
            return parser
    return build()


_YES_NO = [("y", True, "Perform the operation"), ("n", False, "Do not perform the operation")]


def ask_user(text: str, choices: list[tuple[str, Any, str]] | None = None) -> Any:
    """Ask on the controlling terminal, as Ganeti's AskUser does: the question
    (wrapped at 70 columns), then ``y/[n]/?: ``; ``?`` explains the choices.
    Without a terminal the answer is the last choice (for yes/no: no)."""
    import textwrap

    choices = choices or _YES_NO
    answer = choices[-1][1]
    text = "\n".join(
        textwrap.fill(line, 70, replace_whitespace=False) for line in text.splitlines()
    )
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return answer
    keys = [entry[0] for entry in choices]
    prompt = "/".join([*keys[:-1], f"[{keys[-1]}]", "?"])
    values = {entry[0]: entry[1] for entry in choices}
    try:
        while True:
            os.write(tty, f"{text}\n{prompt}: ".encode())
            read = _read_line(tty, 2)
            if not read:  # the terminal went away
                return answer
            line = read.strip().lower()
            if line in values:
                return values[line]
            if line == "?":
                help_lines = "".join(f" {key} - {help_text}\n" for key, _, help_text in choices)
                os.write(tty, (help_lines + "\n").encode())
    finally:
        os.close(tty)


def _read_line(fd: int, limit: int) -> str:
    """Up to ``limit`` characters, or fewer up to and including a newline
    (readline(limit) on an unbuffered descriptor)."""
    data = b""
    while len(data) < limit:
        char = os.read(fd, 1)
        if not char:
            break
        data += char
        if char == b"\n":
            break
    return data.decode(errors="replace")


def confirm(question: str) -> bool:
    """A yes/no question on the terminal (no terminal: no)."""
    return bool(ask_user(question))
