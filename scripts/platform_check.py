#!/usr/bin/env python3
"""Finds calls that exist on one platform only and are not inside a guard for that platform.

    scripts/platform_check.py [DIR…]       (default: Sources Examples)
    scripts/platform_check.py --self-test  (shows that it finds what it is meant to find)

ckport is tested on Linux and built for macOS too. A Linux-only call (sync_file_range,
posix_fadvise, `Glibc.`, a socket type's `.rawValue`, FoundationNetworking, …) must sit inside
`#if canImport(Glibc)` / `#if os(Linux)` in Swift or `#ifdef __linux__` in C; a Darwin-only one
(F_NOCACHE, F_FULLFSYNC, `Darwin.`) inside `#if canImport(Darwin)` / `os(macOS)` or
`__APPLE__`. An `#else` branch counts as the other platform's guard. Exits 1 and lists each
unguarded call with its file and line; 0 when there is none.
"""
import os
import re
import sys

LINUX_ONLY = [r"\bsync_file_range\b", r"\bposix_fadvise\b", r"\bposix_fallocate\b", r"\bfdatasync\b", r"\bGlibc\.", r"\bSOCK_[A-Z]+\.rawValue",
              r"\bepoll_", r"\binotify_", r"\beventfd\b", r"\bmemfd_create\b", r"\bO_TMPFILE\b", r"\brenameat2\b", r"\bcopy_file_range\b",
              r"\bmallinfo\b", r"\bmalloc_trim\b", r"\bsched_getaffinity\b", r"^\s*import\s+Glibc\b", r"^\s*import\s+FoundationNetworking\b",
              r"\bst_mtim\b", r"\bst_atim\b", r"\bst_ctim\b", r"\bTCP_KEEPIDLE\b"]
DARWIN_ONLY = [r"\bF_NOCACHE\b", r"\bF_FULLFSYNC\b", r"\bDarwin\.", r"^\s*import\s+Darwin\b", r"\bsin_len\b", r"\bst_mtimespec\b", r"\bTCP_KEEPALIVE\b"]
LINUX_GUARD = re.compile(r"canImport\((Glibc|FoundationNetworking|Musl)\)|os\(Linux\)|__linux__")
DARWIN_GUARD = re.compile(r"canImport\(Darwin\)|os\((macOS|iOS|tvOS|watchOS|visionOS)\)|__APPLE__|__MACH__")


def check_text(name, text):
    """(line, call, platform) of each unguarded platform-only call in one file's text."""
    problems = []
    stack = []  # per open #if: the conditions of the branch we are in, as (linux, darwin) flags
    c_like = name.endswith((".c", ".h"))
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        directive = re.match(r"^#\s*(if|ifdef|ifndef|elif|elseif|else|endif)\b(.*)$", stripped)
        if directive:
            kind, condition = directive.group(1), directive.group(2)
            if kind in ("if", "ifdef", "ifndef"):
                negated = kind == "ifndef" or condition.strip().startswith("!")
                linux, darwin = bool(LINUX_GUARD.search(condition)), bool(DARWIN_GUARD.search(condition))
                if negated:
                    linux, darwin = darwin, linux
                stack.append({"linux": linux, "darwin": darwin, "seen": [(linux, darwin)]})
            elif kind in ("elif", "elseif") and stack:
                linux, darwin = bool(LINUX_GUARD.search(condition)), bool(DARWIN_GUARD.search(condition))
                stack[-1]["seen"].append((linux, darwin))
                stack[-1]["linux"], stack[-1]["darwin"] = linux, darwin
            elif kind == "else" and stack:
                # The other platform's branch: Linux's when an earlier branch was Darwin's, and so on.
                earlier_linux = any(l for l, _ in stack[-1]["seen"])
                earlier_darwin = any(d for _, d in stack[-1]["seen"])
                stack[-1]["linux"], stack[-1]["darwin"] = earlier_darwin, earlier_linux
            elif kind == "endif" and stack:
                stack.pop()
            continue
        code = line
        if c_like:
            code = re.sub(r"/\*.*?\*/", "", code)
            code = code.split("//")[0] if not code.lstrip().startswith("#") else code
        else:
            code = re.sub(r'"(\\.|[^"\\])*"', '""', code).split("//")[0]
        in_linux = any(frame["linux"] for frame in stack)
        in_darwin = any(frame["darwin"] for frame in stack)
        for pattern in LINUX_ONLY:
            match = re.search(pattern, code)
            if match and not in_linux:
                problems.append((number, match.group(0).strip(), "Linux"))
        for pattern in DARWIN_ONLY:
            match = re.search(pattern, code)
            if match and not in_darwin:
                problems.append((number, match.group(0).strip(), "Darwin"))
    return problems


def self_test():
    cases = [
        ("a.swift", "import Glibc\nlet x = 1\n", 1),
        ("b.swift", "#if canImport(Glibc)\nimport Glibc\n#elseif canImport(Darwin)\nimport Darwin\n#endif\n", 0),
        ("c.swift", "#if canImport(Glibc)\nlet fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)\n#else\nlet fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)\n#endif\n", 0),
        ("d.swift", "#if canImport(Glibc)\nlet a = 1\n#else\nlet fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)\n#endif\n", 2),
        ("e.c", "int f(int fd) { return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); }\n", 1),
        ("f.c", "#ifdef __linux__\nint f(int fd) { return posix_fadvise(fd, 0, 0, 4); }\n#elif defined(__APPLE__)\nint f(int fd) { return fcntl(fd, F_NOCACHE, 1); }\n#endif\n", 0),
        ("g.c", "#ifdef __linux__\nint a;\n#else\nint f(int fd) { return fcntl(fd, F_NOCACHE, 1); }\n#endif\n", 0),
        ("h.swift", "// sync_file_range in a comment\nlet s = \"posix_fadvise in a string\"\n", 0),
        ("i.c", "int f(int fd) { return fcntl(fd, F_NOCACHE, 1); }\n", 1),
    ]
    failed = 0
    for name, text, expected in cases:
        found = check_text(name, text)
        if len(found) != expected:
            print(f"self-test {name}: expected {expected} unguarded call(s), found {found}")
            failed += 1
    print(f"self-test: {len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    roots = argv[1:] or ["Sources", "Examples"]
    problems = 0
    files = 0
    for root in roots:
        for folder, _, names in os.walk(root):
            if "/.build" in folder:
                continue
            for name in sorted(names):
                if not name.endswith((".swift", ".c", ".h")):
                    continue
                path = os.path.join(folder, name)
                files += 1
                with open(path, encoding="utf-8") as handle:
                    for line, call, platform in check_text(name, handle.read()):
                        print(f"{path}:{line}: {call} is {platform}-only and not inside a guard for {platform}")
                        problems += 1
    if files == 0:
        print("no source files found")
        return 1
    print(f"{files} files checked, {problems} unguarded platform-only call{'s' if problems != 1 else ''}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
