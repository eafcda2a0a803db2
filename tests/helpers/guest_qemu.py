"""QEMU started by hand (no Corral) on the test guests: the reference the kvm
hypervisor's tests and benchmarks compare against.

QEMU connects, as a client, to a serial socket and a QMP socket the test
listens on before starting it: no race for early output, no polling for
sockets to appear.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import re
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from qemu.qmp import EventListener, QMPClient, QMPError

from tests.helpers import guest

QEMU = "qemu-system-x86_64"
# TCG: /dev/kvm here is paravirtual and stock guest kernels hang on it.
BASE_ARGS = ("-accel", "tcg", "-m", "256", "-nodefaults", "-display", "none", "-no-user-config")
WAIT = 120.0  # generous: TCG on a shared, noisy machine


class BareGuest:
    """A running QEMU: its serial console's lines, its QMP, its process."""

    def __init__(self, proc: asyncio.subprocess.Process, qmp: QMPClient, log: Path) -> None:
        self.proc = proc
        self.qmp = qmp
        self.log = log  # QEMU's own stdout and stderr
        self.lines: list[str] = []
        self.partial = ""  # the last line, not ended yet (a prompt)
        self.closed = False  # the serial console's end: QEMU has exited
        self._changed = asyncio.Condition()
        self.writer: asyncio.StreamWriter | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.events = EventListener()  # every QMP event, in .history
        qmp.register_listener(self.events)

    async def _serial(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        while chunk := await reader.read(65536):
            async with self._changed:
                *done, self.partial = (self.partial + self._decoder.decode(chunk)).split("\n")
                self.lines += [line.rstrip("\r") for line in done]
                self._changed.notify_all()
        async with self._changed:
            self.closed = True
            self._changed.notify_all()

    async def wait_line(
        self, pattern: str, after: int = 0, timeout: float = WAIT, prompt: bool = False
    ) -> re.Match[str]:
        """The first serial line from index ``after`` on that ``pattern`` matches;
        with ``prompt``, the last line too before it ends."""

        def find() -> re.Match[str] | None:
            for line in [*self.lines[after:], *([self.partial] if prompt else [])]:
                if found := re.search(pattern, line):
                    return found
            return None

        async with asyncio.timeout(timeout), self._changed:
            while (found := find()) is None:
                if self.closed:
                    raise AssertionError(f"QEMU exited before {pattern!r}: {self.tail()}")
                await self._changed.wait()
        return found

    async def wait_exit(self, timeout: float = WAIT) -> int:
        """QEMU's exit code, once its serial console's last line is read."""
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
            async with self._changed:
                await self._changed.wait_for(lambda: self.closed)
        return code

    async def type(self, text: str) -> None:
        """Type ``text`` on the serial console."""
        assert self.writer is not None
        self.writer.write(text.encode())
        await self.writer.drain()

    def event_names(self) -> list[str]:
        """The QMP events seen so far, by name."""
        return [str(event["event"]) for event in self.events.history]

    def tail(self, count: int = 20) -> str:
        return "\n".join(self.lines[-count:]) + "\n" + self.log.read_text(errors="replace")


def direct_boot_args(append: str) -> list[str]:
    """Direct kernel boot of the test guest; ``append`` follows console=ttyS0."""
    return ["-kernel", str(guest.guest_kernel()), "-initrd", str(guest.guest_initramfs()),
            "-append", f"console=ttyS0 {append}".strip()]  # fmt: skip


def disk_args(disk: Path) -> list[str]:
    """``disk`` as the first virtio disk (/dev/vda), raw."""
    return ["-drive", f"file={disk},format=raw,if=virtio"]


@contextlib.asynccontextmanager
async def bare_guest(workdir: Path, args: Sequence[str]) -> AsyncIterator[BareGuest]:
    """QEMU with ``args`` (after BASE_ARGS), its serial console on our socket.

    The guest is killed afterwards if still running.
    """
    if shutil.which(QEMU) is None:
        raise AssertionError(f"{QEMU} is not installed (scripts/setup.sh --tests installs it)")
    workdir.mkdir(parents=True, exist_ok=True)
    serial_path, qmp_path, log = workdir / "serial.sock", workdir / "qmp.sock", workdir / "qemu.log"
    connected: asyncio.Future[BareGuest] = asyncio.get_running_loop().create_future()

    async def on_serial(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await (await connected)._serial(reader, writer)

    server = await asyncio.start_unix_server(on_serial, path=str(serial_path))
    qmp = QMPClient(workdir.name)
    await qmp.start_server(str(qmp_path))
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            QEMU, *BASE_ARGS, "-qmp", f"unix:{qmp_path}",
            "-chardev", f"socket,id=serial0,path={serial_path}", "-serial", "chardev:serial0",
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
    try:
        bare = BareGuest(proc, qmp, log)
        connected.set_result(bare)
        accepting = asyncio.ensure_future(qmp.accept())
        exiting = asyncio.ensure_future(proc.wait())
        await asyncio.wait((accepting, exiting), timeout=WAIT, return_when="FIRST_COMPLETED")
        exiting.cancel()
        if not accepting.done():
            accepting.cancel()
            raise AssertionError(f"QEMU did not connect to QMP: {bare.tail()}")
        accepting.result()
        yield bare
    finally:
        # disconnect() re-raises how the connection ended: QEMU may be gone.
        with contextlib.suppress(EOFError, OSError, QMPError):
            await qmp.disconnect()
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        server.close()
        await server.wait_closed()
