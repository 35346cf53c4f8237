"""The sandbox's inside: run by path as `python -I -B child.py` (standard library only; nothing of s2d2 imports).

Stage 1, the runner (inside bubblewrap when there is one) reads its settings from stdin, makes itself undumpable
(so the program cannot open its descriptors through /proc), makes the run's completion token and forks the
program's process, which closes the status pipe, drops every capability (empty bounding set, securebits NOROOT
locked, no_new_privs), sets its resource limits and execs stage 2. The runner reaps its child, reads what stage 2
wrote on the "done" pipe, and writes the verdict (exit status, and whether the token came back) to the status
pipe, which only it holds: a program can neither write a status nor, by killing the runner, leave one behind.

Stage 2 (`--run`) installs the Python-level guards (no sockets, no writes outside the work folder, no ctypes
libraries, no walking the harness's frames or the garbage collector), runs program.py as __main__ and only when
it ran to the end with no SystemExit reads the token (from a pipe, so no Python object holds it while the program
runs) and writes it back on the done pipe. exit(), sys.exit() and SystemExit count as failures whatever the code
(as in HumanEval's own harness): a program that stops early is not mistaken for one whose tests all ran.
"""
import ctypes
import json
import os
import resource
import signal
import sys
import traceback

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 28, 38
SECURE_BITS = 0x3F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS, each with its lock: uid 0 never regains capabilities
NOBODY = 65534
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
PATH_EVENTS = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2, "os.symlink": 2, "os.link": 2,
               "os.chmod": 1, "os.chown": 1, "os.truncate": 1, "os.utime": 1, "os.mkfifo": 1, "os.mknod": 1}
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_capabilities(to_nobody):
    """Uid 0 loses every capability for good at the exec; with `to_nobody` (real root, no PID namespace) it also
    becomes uid/gid nobody, so the program cannot signal the runner or the harness (both root)."""
    if os.geteuid() == 0:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
        for cap in range(last + 1):
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the capability bounding set")
        if to_nobody:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)  # clears every capability: real, effective and saved uid are no longer 0
        else:
            _check(_libc.prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0), "set securebits")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def set_limits(cfg):
    mib = 1024 * 1024
    cpu = int(cfg["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_mb"] * mib,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_mb"] * mib,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg["nproc"] is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"],) * 2)


def end_the_run(*_):
    """SIGKILL every process of the run's group (the runner, the program and whatever it forked), this one too."""
    os.killpg(0, signal.SIGKILL)


def die_with_the_harness(parent):
    """The harness kills the run's process group on each of its own exit paths; when it dies without one (SIGKILL,
    SIGTERM: a program of the same user may send them), the kernel's parent-death signal reaches this runner, which
    then kills the group. `parent` (the harness's pid, None inside bubblewrap, whose --die-with-parent covers it)
    closes the race of a harness that died before the signal was set."""
    signal.signal(signal.SIGTERM, end_the_run)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "set the parent-death signal")
    if parent is not None and os.getppid() != parent:
        end_the_run()


def runner():
    cfg = json.loads(sys.stdin.read())
    die_with_the_harness(cfg.pop("parent", None))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    status = cfg.pop("status_fd")
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "make the runner undumpable")
    token = os.urandom(16).hex().encode()
    token_r, token_w = os.pipe()
    os.write(token_w, token)
    os.close(token_w)
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(status)
        os.close(done_r)
        _program_process(cfg, token_r, done_w)
    os.close(token_r)
    os.close(done_w)
    code = _reap(pid)
    os.set_blocking(done_r, False)
    try:
        came_back = os.read(done_r, 256).strip() == token
    except OSError:
        came_back = False
    verdict = {"status": code, "finished": came_back, "applied": [], "missing": {}}
    os.write(status, (json.dumps(verdict) + "\n").encode())
    os._exit(0)


def _program_process(cfg, token_r, done_w):
    try:
        settings, writer = os.pipe()  # stage 2's settings stay off argv and environ
        os.write(writer, json.dumps({**cfg, "token_fd": token_r, "done_fd": done_w}).encode())
        os.close(writer)
        for fd in (settings, token_r, done_w):
            os.set_inheritable(fd, True)
        drop_capabilities(cfg["to_nobody"])
        set_limits(cfg)
        # after the uid change (which clears it): the program dies with the runner, whoever kills the runner
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "set the parent-death signal")
        os.execv(sys.executable, [sys.executable, "-I", "-B", os.path.abspath(__file__), "--run", str(settings)])
    except BaseException as exc:  # noqa: BLE001 (report any setup failure as the run's failure)
        os.write(2, f"sandbox setup failed: {exc}\n".encode())
    os._exit(125)


def _reap(pid):
    """Wait for the program's process, reaping every other child meanwhile; its wait status as a dict."""
    while True:
        try:
            done, wstatus = os.wait()
        except ChildProcessError:
            return {"exit": None, "signal": None}
        if done == pid:
            if os.WIFSIGNALED(wstatus):
                return {"exit": None, "signal": os.WTERMSIG(wstatus)}
            return {"exit": os.WEXITSTATUS(wstatus), "signal": None}


def install_guards(work):
    """Python-level defence in depth; the kernel-level isolation (if any) does not depend on it."""
    root = os.path.realpath(work)
    prefix = root + os.sep

    def inside(path):
        if isinstance(path, int):
            return True
        text = os.fsdecode(path)
        full = os.path.realpath(os.path.join(root, text))
        return full == root or full == os.devnull or full.startswith(prefix)

    program_over = {"yes": False}  # set once the program is over (its channels closed): tracebacks may print

    def hook(event, args):
        if not program_over["yes"] and (event == "sys._getframe" or (
                event == "object.__getattr__" and args[1] in FRAME_LINKS)):
            raise ValueError("sandbox: frame access is disabled (the harness's frames are private)")
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"sandbox: {event} is disabled ({BLOCKED_EVENTS[event]})")
        if event in ("open", "os.listdir", "os.scandir") and args and _is_proc_fd(args[0]):
            raise PermissionError("sandbox: /proc descriptors and memory are private")
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2] or 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(flags & WRITE_FLAGS)
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing outside the work folder is disabled: {path!r}")
        elif event in PATH_EVENTS:
            for path in args[:PATH_EVENTS[event]]:
                if path is not None and not inside(path):
                    raise PermissionError(f"sandbox: {event} outside the work folder is disabled: {path!r}")

    sys.addaudithook(hook)
    return lambda: program_over.update(yes=True)


BLOCKED_EVENTS = {"socket.__new__": "no network", "ctypes.dlopen": "no native libraries",
                  "gc.get_objects": "the harness's objects are private",
                  "gc.get_referrers": "the harness's objects are private",
                  "gc.get_referents": "the harness's objects are private",
                  "sys._current_frames": "the harness's frames are private",
                  "sys.settrace": "the harness's frames are private",
                  "sys.setprofile": "the harness's frames are private"}
# ValueError, not PermissionError: typing, namedtuple, enum and warnings fall back when sys._getframe raises it
FRAME_LINKS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")


def _is_proc_fd(path):
    if isinstance(path, int):
        return False
    text = os.path.realpath(os.fsdecode(path))
    parts = text.split("/")
    return (len(parts) >= 4 and parts[1] == "proc" and parts[3] in ("fd", "fdinfo", "mem", "environ", "maps")) \
        or text.startswith("/dev/fd")


def run_program(settings):
    """Run program.py as __main__; hand the token back only when it ran to its end with no SystemExit."""
    with os.fdopen(settings, encoding="utf-8") as fh:
        cfg = json.loads(fh.read())
    token_fd, done_fd = cfg["token_fd"], cfg["done_fd"]
    for fd in (token_fd, done_fd):
        os.set_inheritable(fd, False)
    release = install_guards(cfg["work"]) if cfg["python_guards"] else (lambda: None)
    with open("program.py", encoding="utf-8") as fh:
        source = fh.read()
    scope = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
    del cfg, fh
    try:
        exec(compile(source, "program.py", "exec"), scope)
    except SystemExit as exc:
        _close(token_fd, done_fd)
        sys.stderr.write(f"sandbox: the program raised SystemExit({exc.code!r}) (exit() / sys.exit()) before its "
                         "end: a failure, whatever the code\n")
        _flush_and_exit(1)
    except BaseException:  # noqa: BLE001 (the program's failure is the result)
        _close(token_fd, done_fd)
        release()
        traceback.print_exc()
        _flush_and_exit(1)
    os.write(done_fd, os.read(token_fd, 256))
    _flush_and_exit(0)


def _close(*fds):
    for fd in fds:
        os.close(fd)


def _flush_and_exit(code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        run_program(int(sys.argv[2]))
    else:
        runner()
