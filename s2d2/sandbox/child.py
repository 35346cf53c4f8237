"""The sandbox's inside: run by path as `python -I -B child.py` (standard library only; nothing of s2d2 imports).

Stage 1, the runner (PID 1 of the new PID namespace when there is one) reads its settings from stdin, then:
joins the run's pids cgroup (when the parent made one), makes every mount read-only except the work folder (in
a private mount namespace), and forks the program's process, which drops every capability (empty bounding set,
securebits NOROOT locked, no_new_privs), sets its resource limits and execs stage 2. The runner reaps every
process (orphans come to PID 1), and when the program's process ends it writes the exit status to the status pipe
and exits; the kernel then kills whatever is left in the namespace.

Stage 2 (`--run`) installs the Python-level guards (no sockets, no writes outside the work folder, no ctypes
libraries), runs program.py as __main__, and only when it ran to the end writes the run's token to the status pipe:
a program that exits early (os._exit(0) before the tests) is not mistaken for one that passed.
"""
import ctypes
import json
import os
import resource
import sys
import traceback

PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 24, 28, 38
SECURE_BITS = 0x3F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS, each with its lock: uid 0 never regains capabilities
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048,
               "relatime": 1 << 21}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
PATH_EVENTS = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2, "os.symlink": 2, "os.link": 2,
               "os.chmod": 1, "os.chown": 1, "os.truncate": 1, "os.utime": 1, "os.mkfifo": 1, "os.mknod": 1}
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def make_readonly(work):
    """Bind the work folder onto itself, then remount every other mount read-only (keeping its locked flags)."""
    _check(_libc.mount(work.encode(), work.encode(), None, MS_BIND, None), "bind the work folder")
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split() for line in fh]
    for fields in mounts:
        point = fields[4].replace("\\040", " ")
        if point == work:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in fields[5].split(","):
            flags |= MOUNT_FLAGS.get(option, 0)
        _check(_libc.mount(None, point.encode(), None, flags, None), f"remount {point} read-only")
    os.chdir(work)  # the cwd still pointed into the mount below the bind: enter the writable one


def drop_capabilities():
    """Uid 0 (real, or root of a user namespace) keeps its uid but loses every capability for good at the exec."""
    if os.geteuid() == 0:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
        for cap in range(last + 1):
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the capability bounding set")
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


def runner():
    cfg = json.loads(sys.stdin.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    status = cfg["status_fd"]
    applied, missing = [], {}
    if cfg["cgroup"]:
        try:
            with open(os.path.join(cfg["cgroup"], "cgroup.procs"), "w") as fh:
                fh.write("0")
            applied.append("pids-cgroup")
        except OSError as exc:
            missing["pids-cgroup"] = str(exc)
    if cfg["readonly"]:
        try:
            make_readonly(cfg["work"])
            applied.append("read-only-filesystem")
        except OSError as exc:
            missing["read-only-filesystem"] = str(exc)
    pid = os.fork()
    if pid == 0:
        _program_process(cfg)
    code = _reap(pid)
    os.write(status, (json.dumps({"status": code, "applied": applied, "missing": missing}) + "\n").encode())
    os._exit(0)


def _program_process(cfg):
    try:
        settings, writer = os.pipe()  # stage 2's settings (its token among them) stay off argv and environ
        os.write(writer, json.dumps(cfg).encode())
        os.close(writer)
        os.set_inheritable(settings, True)
        drop_capabilities()
        set_limits(cfg)
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

    def hook(event, args):
        if event == "socket.__new__" or event == "ctypes.dlopen":
            raise PermissionError(f"sandbox: {event} is disabled (no network, no native libraries)")
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


def run_program(settings):
    with os.fdopen(settings, encoding="utf-8") as fh:
        cfg = json.loads(fh.read())
    status = cfg["status_fd"]
    os.set_inheritable(status, False)
    if cfg["python_guards"]:
        install_guards(cfg["work"])
    with open("program.py", encoding="utf-8") as fh:
        source = fh.read()
    scope = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
    try:
        exec(compile(source, "program.py", "exec"), scope)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0:
            os.write(status, (cfg["token"] + "\n").encode())
        _flush_and_exit(code)
    except BaseException:  # noqa: BLE001 (the program's failure is the result)
        traceback.print_exc()
        _flush_and_exit(1)
    os.write(status, (cfg["token"] + "\n").encode())
    _flush_and_exit(0)


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
