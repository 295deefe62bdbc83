"""The tasks of `local:terminals`: deterministic shell tasks in the style of EndlessTerminals.

Categories: `files` (create, copy, rename, delete, permissions, archives), `text` (grep/sed/awk/sort/uniq/wc
pipelines) and `scripting` (small bash and python3 programs, checked by running them on fresh inputs).
Every task is graded all-or-nothing from the workspace state at submit.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from ormix.workbench.envs.tasks import Command, Executable, Exists, FileEquals, JsonEquals, Task

# ── seed data (fixed strings, so every session of a task starts identically) ─────────────────────

_DATA_LINES = "".join(f"item {i}\n" for i in range(1, 18))
_APP_LOG = """\
2024-05-01 10:00:01 INFO service started
2024-05-01 10:00:02 ERROR cannot open /var/db/main.db
2024-05-01 10:00:03 INFO retrying
2024-05-01 10:00:04 DEBUG no error here, just a debug line
2024-05-01 10:00:05 ERROR connection refused
2024-05-01 10:00:06 WARN slow response
2024-05-01 10:00:07 ERROR timeout after 30s
"""
_WORDS = "apple\nBanana\ncherry pie\ndate\n"
_POEM = "".join(
    f"line {i}: the {w} river\n"
    for i, w in enumerate(
        ["quiet", "long", "cold", "wide", "dark", "bright", "slow", "deep", "old", "young", "calm", "wild"], 1
    )
)
_NAMES = "mallory\nalice\nbob\nalice\ncarol\nbob\nalice\ndave\n"
_TEXT = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n"


def _freq(text: str) -> str:
    counts = Counter(text.split())
    return "".join(f"{n} {w}\n" for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


_SALES = "date,item,amount\n2024-01-01,pen,12\n2024-01-02,book,40\n2024-01-02,ink,7\n2024-01-03,pad,23\n"
_SITE = (
    "url=http://example.com\nmirror=http://a.example.org and http://b.example.org\n"
    "secure=https://already.example.net\n"
)
_USERS = "name,age,city\nana,34,Lisbon\nben,30,Oslo\ncleo,41,Rome\ndan,22,Kyiv\neva,31,Paris\n"
_CONTACTS = (
    "Write to alice@example.com or bob.smith@mail.example.org.\n"
    "Sales: sales+eu@shop.io, alice@example.com (again)\n"
    "No address on this line; not-an-email@ either.\nzed_99@corp.example.com\n"
)
_ACCESS = "".join(
    f'{ip} - - [01/May/2024:10:00:{i:02d}] "GET /p{i % 3} HTTP/1.1" 200\n'
    for i, ip in enumerate(
        [
            "10.0.0.1",
            "10.0.0.2",
            "10.0.0.3",
            "10.0.0.2",
            "10.0.0.9",
            "10.0.0.2",
            "10.0.0.3",
            "10.0.0.1",
            "10.0.0.3",
            "10.0.0.2",
        ]
    )
)
_IDS = "101\n102\n103\n104\n"
_PAIR_NAMES = "ada\ngrace\nlinus\nbarbara\n"
_CONFIG_JSON = (
    json.dumps(
        {
            "server": {"host": "0.0.0.0", "port": 8000},
            "database": {"host": "db.local", "port": 5432, "name": "app"},
        },
        indent=2,
    )
    + "\n"
)
_SERVER_LOG = """\
2024-05-01T00:00:01 INFO boot
2024-05-01T00:00:02 WARN disk 80% full
2024-05-01T00:00:03 INFO user login
2024-05-01T00:00:04 ERROR crash in worker 3
2024-05-01T00:00:05 INFO user typed [WARN] literally
2024-05-01T00:00:06 DEBUG cache miss
2024-05-01T00:00:07 WARN retry 2
2024-05-01T00:00:08 INFO done
"""
_RECORDS = "id,name,score\n7,ann,90\n3,bo,75\n7,ann,95\n9,cy,60\n3,bob,80\n1,di,70\n9,cy,61\n"
_INVENTORY = "name,qty,price\nbolt,120,0.25\nnut,300,0.1\nwasher,75,0.05\ngear,4,12.5\n"
_NUMS_A = "2\n9\n10\n31\n100\n"
_NUMS_B = "1\n9\n12\n200\n"
_SETTINGS = "[general]\nname=demo\nport=80\n\n[server]\nhost=0.0.0.0\nport=80\n\n[logging]\nlevel=info\n"
_CHECKSUM_FILES = {"a.txt": "alpha\n", "b.txt": "bravo\n", "c.dat": "0123456789\n", "d.md": "# delta\n"}
_MATRIX = "1 2 3 4\n5 6 7 8\n9 10 11 12\n"


def _sha256sums() -> str:
    return "".join(
        f"{hashlib.sha256(c.encode()).hexdigest()}  {n}\n" for n, c in sorted(_CHECKSUM_FILES.items())
    )


def _fizzbuzz(n: int) -> str:
    out = []
    for i in range(1, n + 1):
        out.append("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i))
    return "\n".join(out)


TASKS: list[Task] = [
    # ── easy ──
    Task(
        "files-mkdir-note",
        "easy",
        "files",
        "Create a directory `notes` in the workspace containing a file `todo.txt` whose only line is `buy "
        "milk`.",
        checks=[FileEquals("notes/todo.txt content", path="notes/todo.txt", expected="buy milk\n")],
    ),
    Task(
        "files-copy-backup",
        "easy",
        "files",
        "Copy `config/app.conf` to `backup/app.conf.bak` (create the `backup` directory). Keep the original.",
        files={"config/app.conf": "port=80\nhost=localhost\nmode=prod\n"},
        checks=[
            FileEquals(
                "backup copy", path="backup/app.conf.bak", expected="port=80\nhost=localhost\nmode=prod\n"
            ),
            FileEquals(
                "original kept", path="config/app.conf", expected="port=80\nhost=localhost\nmode=prod\n"
            ),
        ],
    ),
    Task(
        "files-rename-logs",
        "easy",
        "files",
        "Rename every file in `logs/` whose name ends in `.log` so that it ends in `.log.old` instead "
        "(`a.log` -> `a.log.old`). Do not touch other files.",
        files={"logs/a.log": "alpha\n", "logs/b.log": "beta\n", "logs/c.txt": "gamma\n"},
        checks=[
            FileEquals("a renamed", path="logs/a.log.old", expected="alpha\n"),
            FileEquals("b renamed", path="logs/b.log.old", expected="beta\n"),
            Exists("old names gone", paths=("logs/a.log", "logs/b.log"), present=False),
            FileEquals("others untouched", path="logs/c.txt", expected="gamma\n"),
        ],
    ),
    Task(
        "files-delete-tmp",
        "easy",
        "files",
        "Delete every file whose name ends in `.tmp` anywhere under `project/` (including subdirectories). "
        "Keep every other file.",
        files={
            "project/main.py": "print('hi')\n",
            "project/cache.tmp": "x\n",
            "project/sub/x.tmp": "x\n",
            "project/sub/keep.txt": "keep\n",
            "project/sub/deep/y.tmp": "y\n",
            "project/notes.tmp.txt": "not a tmp file\n",
        },
        checks=[
            Command("no .tmp left", cmd="test -z \"$(find project -name '*.tmp')\""),
            Exists("others kept", paths=("project/main.py", "project/sub/keep.txt", "project/notes.tmp.txt")),
        ],
    ),
    Task(
        "files-make-executable",
        "easy",
        "files",
        "Make `run.sh` executable, so that `./run.sh` prints `ok`.",
        files={"run.sh": ("#!/bin/bash\necho ok\n", 0o644)},
        checks=[Executable("run.sh executable", path="run.sh"), Command("runs", cmd="./run.sh", output="ok")],
    ),
    Task(
        "files-append-line",
        "easy",
        "files",
        "Append the line `export EDITOR=vim` to the end of `profile.sh`, keeping its existing lines.",
        files={"profile.sh": "export PATH=/usr/bin:/bin\nexport LANG=C\n"},
        checks=[
            FileEquals(
                "profile.sh",
                path="profile.sh",
                expected="export PATH=/usr/bin:/bin\nexport LANG=C\nexport EDITOR=vim\n",
            )
        ],
        split="test",
    ),
    Task(
        "text-count-lines",
        "easy",
        "text",
        "Write the number of lines in `data.txt` to `count.txt` (just the number).",
        files={"data.txt": _DATA_LINES},
        checks=[FileEquals("count", path="count.txt", expected="17")],
    ),
    Task(
        "text-grep-errors",
        "easy",
        "text",
        "Write every line of `app.log` that contains `ERROR` (upper case) to `errors.txt`, in their "
        "original order.",
        files={"app.log": _APP_LOG},
        checks=[
            FileEquals(
                "errors.txt",
                path="errors.txt",
                expected="".join(x + "\n" for x in _APP_LOG.splitlines() if "ERROR" in x),
            )
        ],
    ),
    Task(
        "text-uppercase",
        "easy",
        "text",
        "Write the contents of `words.txt` converted to upper case to `upper.txt`.",
        files={"words.txt": _WORDS},
        checks=[FileEquals("upper.txt", path="upper.txt", expected=_WORDS.upper())],
        split="test",
    ),
    Task(
        "text-line-range",
        "easy",
        "text",
        "Write lines 5 to 9 (inclusive) of `poem.txt` to `middle.txt`.",
        files={"poem.txt": _POEM},
        checks=[FileEquals("middle.txt", path="middle.txt", expected="".join(_POEM.splitlines(True)[4:9]))],
    ),
    # ── medium ──
    Task(
        "text-sort-unique",
        "medium",
        "text",
        "Write the distinct names in `names.txt`, sorted alphabetically, one per line, to `unique.txt`.",
        files={"names.txt": _NAMES},
        checks=[FileEquals("unique.txt", path="unique.txt", expected="\n".join(sorted(set(_NAMES.split()))))],
    ),
    Task(
        "text-word-frequency",
        "medium",
        "text",
        "Count how often each word occurs in `text.txt` (words are separated by whitespace, case-sensitive). "
        "Write `freq.txt` with one line per word, `COUNT WORD`, sorted by count (highest first), ties by "
        "word in alphabetical order.",
        files={"text.txt": _TEXT},
        checks=[FileEquals("freq.txt", path="freq.txt", expected=_freq(_TEXT))],
    ),
    Task(
        "text-csv-sum",
        "medium",
        "text",
        "Write the sum of the `amount` column of `sales.csv` (it has a header line) to `total.txt`.",
        files={"sales.csv": _SALES},
        checks=[FileEquals("total", path="total.txt", expected="82")],
    ),
    Task(
        "text-https",
        "medium",
        "text",
        "In `site.conf`, replace every occurrence of `http://` with `https://`, editing the file in place.",
        files={"site.conf": _SITE},
        checks=[FileEquals("site.conf", path="site.conf", expected=_SITE.replace("http://", "https://"))],
    ),
    Task(
        "text-awk-filter",
        "medium",
        "text",
        "`users.csv` has the columns name,age,city. Write the names of the users older than 30 (age > 30), "
        "one per line, in file order, to `older.txt`.",
        files={"users.csv": _USERS},
        checks=[FileEquals("older.txt", path="older.txt", expected="ana\ncleo\neva\n")],
    ),
    Task(
        "text-extract-emails",
        "medium",
        "text",
        "Extract every email address in `contacts.txt`; write the distinct addresses, sorted, one per line, "
        "to `emails.txt`.",
        files={"contacts.txt": _CONTACTS},
        checks=[
            FileEquals(
                "emails.txt",
                path="emails.txt",
                expected="alice@example.com\nbob.smith@mail.example.org\nsales+eu@shop.io\n"
                "zed_99@corp.example.com\n",
            )
        ],
    ),
    Task(
        "text-top-ip",
        "medium",
        "text",
        "Find the IP address with the most requests in `access.log` (the IP is the first field) and write "
        "`IP COUNT` (separated by one space) to `top_ip.txt`.",
        files={"access.log": _ACCESS},
        checks=[FileEquals("top_ip.txt", path="top_ip.txt", expected="10.0.0.2 4")],
    ),
    Task(
        "text-paste-pairs",
        "medium",
        "text",
        "Combine `ids.txt` and `names.txt` line by line into `pairs.txt`, each line `ID:NAME`.",
        files={"ids.txt": _IDS, "names.txt": _PAIR_NAMES},
        checks=[
            FileEquals(
                "pairs.txt",
                path="pairs.txt",
                expected="".join(
                    f"{i}:{n}\n" for i, n in zip(_IDS.split(), _PAIR_NAMES.split(), strict=True)
                ),
            )
        ],
        split="test",
    ),
    Task(
        "files-find-large",
        "medium",
        "files",
        "List the files under `data/` (recursively) that are larger than 1000 bytes. Write their paths "
        "relative to the workspace (like `data/x.bin`), sorted, one per line, to `large.txt`.",
        files={
            "data/small.txt": "s" * 500,
            "data/edge.txt": "e" * 1000,
            "data/big.bin": "b" * 5000,
            "data/just.txt": "j" * 1001,
            "data/nested/huge.log": "h" * 2000,
            "data/nested/tiny": "t",
        },
        checks=[
            FileEquals(
                "large.txt", path="large.txt", expected="data/big.bin\ndata/just.txt\ndata/nested/huge.log\n"
            )
        ],
    ),
    Task(
        "text-json-port",
        "medium",
        "scripting",
        "Read `config.json` and write the value of `database.port` to `port.txt`.",
        files={"config.json": _CONFIG_JSON},
        checks=[FileEquals("port.txt", path="port.txt", expected="5432")],
    ),
    Task(
        "script-greet",
        "medium",
        "scripting",
        "Create an executable script `greet.sh` that prints `Hello, NAME!` where NAME is its first argument, "
        "or `Hello, world!` when it is called without arguments.",
        checks=[
            Executable("greet.sh executable", path="greet.sh"),
            Command("with a name", cmd="./greet.sh Ada", output="Hello, Ada!"),
            Command("without a name", cmd="./greet.sh", output="Hello, world!"),
        ],
    ),
    Task(
        "script-fizzbuzz",
        "medium",
        "scripting",
        "Create `fizzbuzz.py`: `python3 fizzbuzz.py N` prints the numbers 1 to N, one per line, except "
        "`Fizz` for multiples of 3, `Buzz` for multiples of 5 and `FizzBuzz` for multiples of both.",
        checks=[
            Command("N=15", cmd="python3 fizzbuzz.py 15", output=_fizzbuzz(15)),
            Command("N=5", cmd="python3 fizzbuzz.py 5", output=_fizzbuzz(5)),
        ],
    ),
    Task(
        "script-sum-stdin",
        "medium",
        "scripting",
        "Create `sum.sh`, which reads integers from standard input, one per line, and prints their sum: "
        "`printf '1\\n2\\n3\\n' | bash sum.sh` prints `6`; no input prints `0`.",
        checks=[
            Command("1+2+3", cmd="printf '1\\n2\\n3\\n' | bash sum.sh", output="6"),
            Command("with negatives", cmd="printf '10\\n-4\\n100\\n' | bash sum.sh", output="106"),
            Command("empty input", cmd="bash sum.sh < /dev/null", output="0"),
        ],
        split="test",
    ),
    Task(
        "script-fix-count",
        "medium",
        "scripting",
        "`count_txt.sh` should print how many `.txt` files are directly inside the directory given as its "
        "first argument, but it prints wrong numbers. Fix the script.",
        files={
            "count_txt.sh": "#!/bin/bash\n# Print how many .txt files are directly inside the directory $1\n"
            'ls "$1"/*.text 2>/dev/null | wc -l\n'
        },
        checks=[
            Command(
                "two .txt files",
                output="2",
                cmd="d=$(mktemp -d) && touch $d/a.txt $d/b.txt $d/c.md && bash count_txt.sh $d",
            ),
            Command(
                "no .txt file", output="0", cmd="d=$(mktemp -d) && touch $d/x.md && bash count_txt.sh $d"
            ),
            Command(
                "only directly inside",
                output="1",
                cmd="d=$(mktemp -d) && mkdir $d/sub && touch $d/a.txt $d/sub/b.txt $d/sub/c.txt && "
                "bash count_txt.sh $d",
            ),
        ],
    ),
    # ── hard ──
    Task(
        "text-log-levels",
        "hard",
        "text",
        "Each line of `server.log` is `TIMESTAMP LEVEL MESSAGE`. Write `report.txt` with one line per level "
        "that occurs, `LEVEL COUNT`, sorted by level name.",
        files={"server.log": _SERVER_LOG},
        checks=[FileEquals("report.txt", path="report.txt", expected="DEBUG 1\nERROR 1\nINFO 4\nWARN 2\n")],
    ),
    Task(
        "text-dedupe-csv",
        "hard",
        "text",
        "Write `dedup.csv`: `records.csv` without the rows whose id (first column) already appeared on an "
        "earlier row. Keep the header, the first row of each id, and the original order.",
        files={"records.csv": _RECORDS},
        checks=[
            FileEquals(
                "dedup.csv", path="dedup.csv", expected="id,name,score\n7,ann,90\n3,bo,75\n9,cy,60\n1,di,70\n"
            )
        ],
    ),
    Task(
        "files-archive",
        "hard",
        "files",
        "Create `backup.tar.gz`, a gzip-compressed tar archive of the `src` directory whose member paths "
        "start with `src/` (e.g. `src/main.py`). Keep `src/` itself.",
        files={"src/main.py": "import lib.util\n", "src/lib/util.py": "X = 1\n", "src/README": "readme\n"},
        checks=[
            Command("member paths", cmd="tar -tzf backup.tar.gz | grep -qx 'src/lib/util.py'"),
            Command("contents", cmd="d=$(mktemp -d) && tar -xzf backup.tar.gz -C $d && diff -r src $d/src"),
            Exists("src kept", paths=("src/main.py", "src/lib/util.py")),
        ],
    ),
    Task(
        "script-csv-to-json",
        "hard",
        "scripting",
        "Convert `inventory.csv` to `inventory.json`: a JSON array with one object per row, in file order, "
        "with keys `name` (string), `qty` (integer) and `price` (number).",
        files={"inventory.csv": _INVENTORY},
        checks=[
            JsonEquals(
                "inventory.json",
                path="inventory.json",
                expected=[
                    {"name": "bolt", "qty": 120, "price": 0.25},
                    {"name": "nut", "qty": 300, "price": 0.1},
                    {"name": "washer", "qty": 75, "price": 0.05},
                    {"name": "gear", "qty": 4, "price": 12.5},
                ],
            )
        ],
    ),
    Task(
        "script-rename-ext",
        "hard",
        "scripting",
        "Write `rename_ext.sh`: `bash rename_ext.sh DIR FROM TO` renames every file directly inside DIR "
        "whose name ends in `.FROM` so that it ends in `.TO` instead (`a.txt` -> `a.md`). Names may contain "
        "spaces.",
        checks=[
            Command(
                "renames, spaces included",
                output="a.md\nb c.md\nd.log",
                cmd='d=$(mktemp -d) && touch "$d/a.txt" "$d/b c.txt" "$d/d.log" && '
                'bash rename_ext.sh "$d" txt md && ls "$d"',
            )
        ],
    ),
    Task(
        "text-merge-sorted",
        "hard",
        "text",
        "`a.txt` and `b.txt` are sorted in ascending numeric order. Merge them into `merged.txt`, also in "
        "ascending numeric order, keeping duplicates.",
        files={"a.txt": _NUMS_A, "b.txt": _NUMS_B},
        checks=[
            FileEquals(
                "merged.txt",
                path="merged.txt",
                expected="\n".join(str(n) for n in sorted(map(int, (_NUMS_A + _NUMS_B).split()))),
            )
        ],
    ),
    Task(
        "files-ini-update",
        "hard",
        "files",
        "In `settings.ini`, in the `[server]` section only, change `port=80` to `port=8080` and add the line "
        "`timeout=30` right after it. Leave every other line unchanged.",
        files={"settings.ini": _SETTINGS},
        checks=[
            FileEquals(
                "settings.ini",
                path="settings.ini",
                expected=_SETTINGS.replace(
                    "host=0.0.0.0\nport=80\n", "host=0.0.0.0\nport=8080\ntimeout=30\n"
                ),
            )
        ],
    ),
    Task(
        "text-todo-report",
        "hard",
        "text",
        "For every line containing `TODO` in the `.py` files under `src/` (recursively), write `PATH:LINE` "
        "(path relative to the workspace, e.g. `src/app.py:12`) to `todo_report.txt`, sorted as plain text "
        "(`LC_ALL=C sort`).",
        files={
            "src/app.py": "import os\n# TODO: config\nx = 1\n\n\n\n\n\n\n\n\ny = 2  # TODO later\n",
            "src/util/io.py": "def f():\n    pass  # TODO\n",
            "src/notes.txt": "TODO: not python\n",
            "src/clean.py": "print('nothing to do')\n",
        },
        checks=[
            FileEquals(
                "todo_report.txt",
                path="todo_report.txt",
                expected="\n".join(sorted(["src/app.py:2", "src/app.py:12", "src/util/io.py:2"])),
            )
        ],
    ),
    Task(
        "files-checksums",
        "hard",
        "files",
        "In `files/`, create `SHA256SUMS` with the SHA-256 checksum of every other file in `files/`, in "
        "`sha256sum` format and sorted by file name, so that `cd files && sha256sum -c SHA256SUMS` succeeds.",
        files={f"files/{n}": c for n, c in _CHECKSUM_FILES.items()},
        checks=[
            Command("sha256sum -c", cmd="cd files && sha256sum -c SHA256SUMS"),
            FileEquals("SHA256SUMS", path="files/SHA256SUMS", expected=_sha256sums()),
        ],
        split="test",
    ),
    Task(
        "text-transpose",
        "hard",
        "text",
        "Transpose `matrix.txt` (rows of space-separated numbers): write the columns as rows, "
        "space-separated, to `transposed.txt`.",
        files={"matrix.txt": _MATRIX},
        checks=[
            FileEquals(
                "transposed.txt",
                path="transposed.txt",
                expected="\n".join(
                    " ".join(col) for col in zip(*(r.split() for r in _MATRIX.splitlines()), strict=True)
                ),
            )
        ],
        split="test",
    ),
]
