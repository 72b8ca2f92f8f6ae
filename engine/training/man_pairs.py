"""Real description-entry pairs from Debian man pages, for the quote's cross-encoder (issue 66).

A man page's tagged items are a manual's named entries: an option ("-l, --long" over "use a long
listing format"), a configuration key ("PermitRootLogin" over "Specifies whether root can log
in"), a command of an interactive program. Each item gives one record: the query is the first
sentence of its description (written by the page's author, not by a template), the positive
is the item as a manual shows it (its tag line, then its description); when the description
has more sentences, half the time (seeded) the query's sentence is left out of the positive,
so that the pair is not read by copying. The page's NAME line ("ls - list directory contents")
gives one more record per page: the description as the query, the page's SYNOPSIS and the
opening of its DESCRIPTION as the positive, the other pages of the package as negatives.
Negatives of an item: other items of the same page, the BM25-nearest to the query first
(they share its words: the case the second stage is for), then a few drawn at random.

Pages are rendered by ``man -l`` (groff) at a fixed width and read by indentation. Packages
are fetched with ``apt-get download`` (``engine.training.data.fetch_packages``); never the
dev probe's, the held-back manuals', the calibration manuals' or the reserved packages
(``EXCLUDED``, checked when the list is read).

Run: ``python -m engine.training.man_pairs --out data/man/man_pairs.jsonl.gz``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
from pathlib import Path

import numpy as np

from engine.routing import lexical

HARD, RANDOM = 10, 4
ENTRY_WORDS = 70  # the positive's words (an entry as the quote shows it)
PER_PAGE = 40  # items kept per page (long pages would otherwise dominate)
PACKAGES = """coreutils findutils grep sed gawk tar gzip bzip2 xz-utils zstd rsync openssh-client
openssh-server curl wget util-linux procps iproute2 net-tools less diffutils patch make binutils
gdb strace ltrace lsof tmux screen bash dash tcsh sudo passwd login cron at man-db groff-base
texinfo sqlite3 socat netcat-openbsd nmap tcpdump iptables ethtool parted e2fsprogs lvm2 mdadm
cryptsetup-bin smartmontools hdparm systemd dpkg apt debianutils openssl gpg sox graphviz
poppler-utils qpdf ghostscript mpv aria2 lftp htop sysstat bc dc units jq xmlstarlet xsltproc
tidy w3m lynx msmtp mpg123 flac lame libimage-exiftool-perl cmake ninja-build meson autoconf
automake libtool-bin bison flex m4 indent cscope doxygen inotify-tools file moreutils pv
parallel tree ncdu cpio pax sharutils dosfstools mtools squashfs-tools xorriso logrotate rsyslog
dnsmasq-base chrony openvpn wireguard-tools unbound bind9-dnsutils ldap-utils fetchmail procmail
xterm mc samba-common-bin postfix lighttpd imagemagick-6.q16 rclone restic borgbackup duplicity
""".split()
# the dev probe's packages and their programs, the held-back and calibration manuals, the
# reserved evaluation packages
EXCLUDED = {"debian-reference-en", "scons", "scons-doc", "zsh", "zsh-common", "zsh-doc",
            "pari-gp", "pari-doc", "octave", "octave-doc", "lilypond", "lilypond-doc-pdf",
            "gap", "gap-doc", "gmsh", "gmsh-doc", "glpk-utils", "glpk-doc", "gnuplot",
            "gnuplot-doc", "ngspice", "ngspice-doc", "why3", "r-base", "r-doc-pdf", "pseudo",
            "texlive-latex-recommended-doc", "git", "git-doc", "nano", "ffmpeg", "mutt",
            "latex-beamer", "python3-reportlab", "camlidl"}
_SENT = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(])")
_SECTION = re.compile(r"^[A-Z][A-Z0-9 /&-]+$")


def render(page: Path) -> list[str]:
    """The page as text lines (groff at 100 columns, no hyphenation or justification)."""
    env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    out = subprocess.run(["man", "--nh", "--nj", "-l", str(page)], env=env, capture_output=True,
                         text=True, timeout=60).stdout
    return [re.sub(r".\x08", "", ln).rstrip() for ln in out.splitlines()]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def sections(lines: list[str]) -> dict[str, list[str]]:
    out, cur = {}, None
    for ln in lines:
        if ln and not ln.startswith(" ") and _SECTION.match(ln.strip()):
            cur = ln.strip()
            out.setdefault(cur, [])
        elif cur is not None:
            out[cur].append(ln)
    return out


def items(body: list[str]) -> list[tuple[str, str]]:
    """(tag, description) of the tagged paragraphs: a line at the section's indent followed by
    lines indented deeper (or the description on the tag's own line after 2+ spaces); a line
    indented less (a subsection's title) ends the item."""
    out, tag, desc = [], None, []
    base = min((_indent(ln) for ln in body if ln.strip() and _indent(ln) >= 5), default=7)

    def flush():
        if tag and desc:
            out.append((tag, " ".join(" ".join(desc).split())))

    for ln in body:
        if not ln.strip():
            continue
        ind = _indent(ln)
        if ind == base:
            flush()
            tag, desc = None, []
            head = ln.strip()
            m = re.match(r"^(\S.*?\S)\s{2,}(\S.*)$", head)
            if m and len(m.group(1)) <= 24 and m.group(1).startswith(("-", "+")):
                tag, desc = m.group(1), [m.group(2)]
            elif len(head) <= 80 and not head.endswith((".", ":")):
                tag = head
        elif tag is not None and ind > base:
            desc.append(ln.strip())
        else:
            flush()
            tag, desc = None, []
    flush()
    return out


def _first_sentence(text: str) -> tuple[str, str]:
    parts = _SENT.split(text, maxsplit=1)
    return parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")


def _cut(text: str, words: int = ENTRY_WORDS) -> str:
    return " ".join(text.split()[:words])


def page_records(name: str, lines: list[str], rng: random.Random) -> tuple[list[dict], dict]:
    """The page's item records and its NAME entry ({"query", "entry"} or empty)."""
    secs = sections(lines)
    entries = []
    for title, body in secs.items():
        if title in ("NAME", "SYNOPSIS", "SEE ALSO", "AUTHOR", "AUTHORS", "COPYRIGHT",
                     "REPORTING BUGS", "BUGS", "HISTORY", "EXAMPLES", "EXAMPLE"):
            continue
        entries += [(t, d) for t, d in items(body) if 4 <= len(d.split()) and len(t) <= 80]
    if len(entries) > PER_PAGE:
        entries = rng.sample(entries, PER_PAGE)
    texts = [_cut(f"{t}\n{d}") for t, d in entries]
    recs = []
    if len(entries) >= 4:
        index = lexical.LexicalIndex([lexical.tokenize(t) for t in texts])
        for k, (tag, desc) in enumerate(entries):
            query, rest = _first_sentence(desc)
            if len(query.split()) < 4 or len(query.split()) > 40:
                continue
            positive = texts[k]
            if rest and len(rest.split()) >= 6 and rng.random() < 0.5:
                positive = _cut(f"{tag}\n{rest}")
            order = [int(j) for j in np.argsort(-index.scores(lexical.tokenize(query)),
                                                  kind="stable") if j != k]
            negs = order[:HARD] + rng.sample(order[HARD:], min(RANDOM, len(order[HARD:])))
            recs.append({"source": name, "kind": "item", "question": query,
                         "positive": positive, "negatives": [texts[j] for j in negs]})
    head = " ".join(" ".join(secs.get("NAME", [])).split())
    m = re.match(r"^(.+?)\s+\\?[-\u2010\u2013\u2014]+\s+(.{8,})$", head)
    desc = " ".join(" ".join(secs.get("DESCRIPTION", [])).split())
    named = {}
    if m and desc:
        synopsis = " ".join(" ".join(secs.get("SYNOPSIS", [])).split())
        named = {"query": m.group(2), "entry": _cut(f"{synopsis}\n{desc}" if synopsis
                                                     else f"{m.group(1)}\n{desc}")}
    return recs, named


def package_pages(root: Path) -> list[Path]:
    return sorted(p for sec in ("man1", "man5", "man8")
                  for p in (root / "usr/share/man" / sec).glob("*") if p.is_file())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data/man/man_pairs.jsonl.gz")
    ap.add_argument("--root", default="data/man")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from engine.training.data import fetch_packages

    bad = EXCLUDED & set(PACKAGES)
    if bad:
        raise ValueError(f"excluded packages in the list: {sorted(bad)}")
    rng = random.Random(args.seed)
    base = Path(args.root)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fetched, total = [], 0
    with gzip.open(out, "wt") as f:  # written package by package (a long run can be read early)
        for pkg in PACKAGES:
            dest = base / pkg
            try:
                fetched += fetch_packages([pkg], dest)
            except subprocess.CalledProcessError:
                print(f"{pkg}: not fetched", flush=True)
                continue
            records = package_records(pkg, package_pages(dest / "root"), rng)
            for r in records:
                f.write(json.dumps(r) + "\n")
            f.flush()
            total += len(records)
            (out.parent / "manifest.json").write_text(json.dumps(fetched, indent=1))
            print(f"{pkg}: {len(records)} records", flush=True)
    print(f"{total} records from {len(fetched)} packages -> {out}")


def package_records(pkg: str, pages: list[Path], rng: random.Random) -> list[dict]:
    """The item records of every page of a package, then its NAME records (each page's NAME
    line against the package's other pages)."""
    records, names = [], []
    for page in pages:
        recs, named = page_records(f"{pkg}/{page.name}", render(page), rng)
        records += recs
        if named:
            names.append(named)
    for k, nm in enumerate(names):
        others = [x["entry"] for j, x in enumerate(names) if j != k]
        if len(others) >= 3:
            records.append({"source": pkg, "kind": "name", "question": nm["query"],
                            "positive": nm["entry"],
                            "negatives": rng.sample(others, min(HARD, len(others)))})
    return records

if __name__ == "__main__":
    main()
