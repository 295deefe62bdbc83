"""The tasks of `local:seta`: small software-engineering tasks in the style of Eigent/SETA.

Each task has a few weighted checks; the reward is the weighted fraction that passes, so partial work
earns partial credit. Difficulties `Easy`/`Medium`/`Hard` (skewed to Medium and Hard, as in SETA).
"""

from __future__ import annotations

import json

from ormix.workbench.envs.tasks import (
    Command,
    Exists,
    FileEquals,
    FileMatches,
    JsonEquals,
    Task,
    python_check,
    unittest_check,
)

# ── seed data ────────────────────────────────────────────────────────────────────────────────────

_ESSAY = "Shells are small programs.\nThey run other programs,\n  and they pipe text between them.\n"
_ENV = "APP_NAME=shop\nDEBUG=true\nDB_URL=postgres://db/shop\n"
_PACKAGE = json.dumps({"name": "widget", "version": "1.2.3", "scripts": {"test": "pytest"}}, indent=2) + "\n"
_SCORES = "name,score\nana,81\nben,67\ncleo,94\ndan,72\n"
_APP_LOG = """\
2024-05-01 09:12:01 INFO start
2024-05-01 09:40:11 ERROR db timeout
2024-05-01 10:01:00 ERROR db timeout
2024-05-01 10:05:13 WARN slow
2024-05-01 10:59:59 ERROR cache miss storm
2024-05-01 13:00:00 INFO tick
2024-05-01 14:30:00 ERROR disk full
"""
_INI = "[server]\nhost = 0.0.0.0\nport = 8000\n\n[db]\nname = shop\nuser = admin\n"
_INVENTORY_PY = """\
class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, qty):
        self.items[name] = self.items.get(name, 0) + qty

    def remove(self, name, qty):
        self.items[name] = self.items[name] - qty

    def count(self, name):
        return self.items[name]
"""
_TEST_INVENTORY = """\
import unittest

from inventory import Inventory


class TestInventory(unittest.TestCase):
    def test_add(self):
        inv = Inventory()
        inv.add("bolt", 3)
        inv.add("bolt", 2)
        self.assertEqual(inv.count("bolt"), 5)

    def test_remove_too_many(self):
        inv = Inventory()
        inv.add("bolt", 1)
        with self.assertRaises(ValueError):
            inv.remove("bolt", 2)
        self.assertEqual(inv.count("bolt"), 1)

    def test_count_missing(self):
        self.assertEqual(Inventory().count("nut"), 0)


if __name__ == "__main__":
    unittest.main()
"""
_SHOP_PY = """\
def price_with_tax(price):
    return round(price * (1 + 0.2), 2)


def tax_of(price):
    return round(price * 0.2, 2)


def net_from_gross(gross):
    return round(gross / (1 + 0.2), 2)
"""
_SEARCH_PY = '''\
def find(items, target):
    """Index of target in the ascending list items, or -1."""
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid
        else:
            hi = mid - 1
    return -1
'''
_CALC_EVAL_PY = '''\
import re


def evaluate(expr):
    """Evaluate + - * / and parentheses on integers, with the usual precedence; / is true division."""
    tokens = re.findall(r"\\d+|[-+*/()]", expr)
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom():
        tok = take()
        if tok == "(":
            value = expression()
            take()
            return value
        return float(tok)

    def expression():
        value = atom()
        while peek() in ("+", "-", "*", "/"):
            op = take()
            rhs = atom()
            if op == "+":
                value += rhs
            elif op == "-":
                value -= rhs
            elif op == "*":
                value *= rhs
            else:
                value /= rhs
        return value

    return expression()
'''
_PASSWD = """\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
zoe:x:1002:1002:Zoe:/home/zoe:/bin/zsh
backup:x:1500:1500:backup:/var/backups:/bin/false
adam:x:1001:1001:Adam:/home/adam:/bin/bash
svc:x:999:999:svc:/srv:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
mia:x:1000:1000:Mia:/home/mia:/bin/bash
"""
_ACCESS = "".join(
    f"10.0.0.{i % 4} GET {p} 200\n"
    for i, p in enumerate(["/a", "/b", "/a", "/c", "/b", "/a", "/d", "/c", "/b", "/e"])
)
_DEPS = "app: lib utils\nlib: core\nutils: core\ncore:\ncli: app\ndocs:\n"

TASKS: list[Task] = [
    # ── Easy ──
    Task(
        "seta-hello-file",
        "Easy",
        "file-operations",
        "Create `hello.txt` in the workspace containing exactly the line `Hello, SETA!`.",
        checks=[
            Exists("hello.txt exists", 1, paths=("hello.txt",)),
            FileEquals("hello.txt content", 2, path="hello.txt", expected="Hello, SETA!\n"),
        ],
        tags=("bash", "files"),
    ),
    Task(
        "seta-fix-add",
        "Easy",
        "debugging",
        "`calc.py` has a bug: `add` does not return the sum of its arguments. Fix it without breaking `mul`.",
        files={"calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"},
        checks=[
            python_check("add(2, 3) == 5", "from calc import add\nassert add(2, 3) == 5", 2),
            python_check("add(-1, 1) == 0", "from calc import add\nassert add(-1, 1) == 0"),
            python_check("mul intact", "from calc import mul\nassert mul(4, 5) == 20"),
        ],
        tags=("python", "bugfix"),
    ),
    Task(
        "seta-count-words",
        "Easy",
        "data-processing",
        "Write the number of words in `essay.txt` (whitespace-separated) to `wordcount.txt`, just the "
        "number.",
        files={"essay.txt": _ESSAY},
        checks=[
            Exists("wordcount.txt exists", 1, paths=("wordcount.txt",)),
            FileEquals("word count", 3, path="wordcount.txt", expected=str(len(_ESSAY.split()))),
        ],
        tags=("bash", "text"),
    ),
    Task(
        "seta-env-file",
        "Easy",
        "system-administration",
        "In `.env`, set `DEBUG=false` (it is `true`) and add the line `LOG_LEVEL=warning`. Keep the other "
        "lines.",
        files={".env": _ENV},
        checks=[
            FileMatches("DEBUG=false", path=".env", patterns=(r"^DEBUG=false$",), absent=(r"^DEBUG=true",)),
            FileMatches("LOG_LEVEL added", path=".env", patterns=(r"^LOG_LEVEL=warning$",)),
            FileMatches(
                "others kept", path=".env", patterns=(r"^APP_NAME=shop$", r"^DB_URL=postgres://db/shop$")
            ),
        ],
        tags=("config", "dotenv"),
    ),
    Task(
        "seta-bump-version",
        "Easy",
        "software-engineering",
        "Bump the version in `package.json` from 1.2.3 to 1.2.4, leaving everything else as it is.",
        files={"package.json": _PACKAGE},
        checks=[
            python_check(
                "version 1.2.4",
                "import json\nassert json.load(open('package.json'))['version'] == '1.2.4'",
                2,
            ),
            JsonEquals(
                "rest unchanged",
                path="package.json",
                expected={"name": "widget", "version": "1.2.4", "scripts": {"test": "pytest"}},
            ),
        ],
        tags=("json", "release"),
    ),
    Task(
        "seta-gitignore",
        "Easy",
        "software-engineering",
        "Create `.gitignore` ignoring `__pycache__/`, `*.pyc` and `.env`, one pattern per line.",
        checks=[
            FileMatches("__pycache__/", path=".gitignore", patterns=(r"^__pycache__/$",)),
            FileMatches("*.pyc", path=".gitignore", patterns=(r"^\*\.pyc$",)),
            FileMatches(".env", path=".gitignore", patterns=(r"^\.env$",)),
        ],
        tags=("git",),
        split="test",
    ),
    # ── Medium ──
    Task(
        "seta-slugify",
        "Medium",
        "software-engineering",
        "Implement `slugify(text)` in `text_utils.py`: lower-case the text, turn every run of characters "
        "that are not ASCII letters or digits into a single `-`, and strip leading and trailing `-`. "
        "Example: `slugify('Hello, World!') == 'hello-world'`.",
        files={"text_utils.py": "def slugify(text):\n    raise NotImplementedError\n"},
        checks=[
            python_check(
                "basic", "from text_utils import slugify\nassert slugify('Hello, World!') == 'hello-world'"
            ),
            python_check(
                "runs collapse", "from text_utils import slugify\nassert slugify('a  --  b__c') == 'a-b-c'"
            ),
            python_check(
                "edges",
                "from text_utils import slugify\nassert slugify('--Top 10 Tips!!') == 'top-10-tips'\n"
                "assert slugify('***') == ''",
            ),
        ],
        tags=("python", "strings"),
    ),
    Task(
        "seta-fix-pagination",
        "Medium",
        "debugging",
        "`pagination.py`'s `page(items, n, size)` should return page `n` (0-based) of `items`, `size` items "
        "per page, but it drops an item. Fix it.",
        files={"pagination.py": "def page(items, n, size):\n    return items[n * size:(n + 1) * size - 1]\n"},
        checks=[
            python_check(
                "full page", "from pagination import page\nassert page(list(range(10)), 1, 3) == [3, 4, 5]", 2
            ),
            python_check(
                "last page", "from pagination import page\nassert page(list(range(10)), 3, 3) == [9]"
            ),
        ],
        tags=("python", "bugfix", "off-by-one"),
    ),
    Task(
        "seta-csv-stats",
        "Medium",
        "data-science",
        "Read `scores.csv` (name,score) and write `stats.json` with keys `count` (number of rows), `mean` "
        "(mean score rounded to 2 decimals) and `max_name` (the name with the highest score).",
        files={"scores.csv": _SCORES},
        checks=[
            python_check("count", "import json\nassert json.load(open('stats.json'))['count'] == 4"),
            python_check("mean", "import json\nassert json.load(open('stats.json'))['mean'] == 78.5"),
            python_check(
                "max_name", "import json\nassert json.load(open('stats.json'))['max_name'] == 'cleo'"
            ),
        ],
        tags=("python", "csv", "json"),
    ),
    Task(
        "seta-errors-by-hour",
        "Medium",
        "data-processing",
        "From `app.log`, write `errors_by_hour.txt`: for each hour (two digits, `HH`) that has ERROR lines, "
        "a line `HH COUNT`, sorted by hour.",
        files={"app.log": _APP_LOG},
        checks=[
            Exists("file exists", paths=("errors_by_hour.txt",)),
            FileEquals("counts", 3, path="errors_by_hour.txt", expected="09 1\n10 2\n14 1\n"),
        ],
        tags=("bash", "logs", "awk"),
    ),
    Task(
        "seta-backup-script",
        "Medium",
        "scripting",
        "Write `backup.sh`: `bash backup.sh SRC DEST` copies every `.conf` file directly inside SRC into "
        "DEST (creating DEST if needed) and prints the number of files it copied.",
        checks=[
            Command(
                "prints count",
                output="2",
                cmd="s=$(mktemp -d) && d=$(mktemp -d)/out && "
                "touch $s/a.conf $s/b.conf $s/c.txt && bash backup.sh $s $d",
            ),
            Command(
                "copies .conf",
                2,
                cmd="s=$(mktemp -d) && d=$(mktemp -d)/out && echo x > $s/a.conf && "
                "echo y > $s/b.conf && bash backup.sh $s $d >/dev/null && diff $s/a.conf $d/a.conf && "
                "diff $s/b.conf $d/b.conf",
            ),
            Command(
                "skips others",
                cmd="s=$(mktemp -d) && d=$(mktemp -d)/out && touch $s/a.conf $s/c.txt && "
                "bash backup.sh $s $d >/dev/null && test ! -e $d/c.txt",
            ),
        ],
        tags=("bash", "backup"),
    ),
    Task(
        "seta-fix-import",
        "Medium",
        "debugging",
        "`python3 -m app.main` should print `Hello, World` but it fails. Fix the package so it does.",
        files={
            "app/__init__.py": "",
            "app/main.py": "from app.helpers import greet\n\nprint(greet('World'))\n",
            "app/helper.py": "def greet(name):\n    return 'Hello, ' + name\n",
        },
        checks=[
            Command("runs", cmd="python3 -m app.main >/dev/null"),
            Command("prints greeting", 2, cmd="python3 -m app.main", output="Hello, World"),
        ],
        tags=("python", "imports"),
    ),
    Task(
        "seta-inventory-tests",
        "Medium",
        "software-engineering",
        "Make the tests in `test_inventory.py` pass by fixing `inventory.py` (do not change the tests): "
        "removing more than is in stock raises ValueError and leaves the stock unchanged; counting an "
        "unknown item gives 0.",
        files={"inventory.py": _INVENTORY_PY, "test_inventory.py": _TEST_INVENTORY},
        checks=[
            unittest_check("test_remove_too_many", "test_inventory.TestInventory.test_remove_too_many"),
            unittest_check("test_count_missing", "test_inventory.TestInventory.test_count_missing"),
            unittest_check("whole suite", "test_inventory", 2),
            FileEquals("tests unchanged", path="test_inventory.py", expected=_TEST_INVENTORY),
        ],
        tags=("python", "testing", "unittest"),
    ),
    Task(
        "seta-ini-to-json",
        "Medium",
        "data-processing",
        "Convert `settings.ini` to `settings.json`: one object per section, mapping each key to its value as "
        "a "
        'string (e.g. `{"server": {"host": "0.0.0.0", ...}, ...}`).',
        files={"settings.ini": _INI},
        checks=[
            Exists("file exists", paths=("settings.json",)),
            JsonEquals(
                "content",
                2,
                path="settings.json",
                expected={
                    "server": {"host": "0.0.0.0", "port": "8000"},
                    "db": {"name": "shop", "user": "admin"},
                },
            ),
        ],
        tags=("python", "config", "json"),
    ),
    Task(
        "seta-find-duplicates",
        "Medium",
        "file-operations",
        "Find the files under `docs/` with identical content. Write `duplicates.txt` with one line per group "
        "of two or more identical files: their paths (relative to the workspace, e.g. `docs/a.txt`) sorted "
        "and separated by single spaces; lines sorted.",
        files={
            "docs/a.txt": "same\n",
            "docs/b.txt": "other\n",
            "docs/sub/c.txt": "same\n",
            "docs/d.txt": "other\n",
            "docs/e.txt": "unique\n",
            "docs/sub/f.txt": "same\n",
        },
        checks=[
            Exists("file exists", paths=("duplicates.txt",)),
            FileEquals(
                "groups",
                3,
                path="duplicates.txt",
                expected="docs/a.txt docs/sub/c.txt docs/sub/f.txt\ndocs/b.txt docs/d.txt\n",
            ),
        ],
        tags=("bash", "checksums"),
    ),
    Task(
        "seta-crontab",
        "Medium",
        "system-administration",
        "Write `crontab.txt` with two crontab lines: run `/opt/backup.sh` every day at 02:30, and "
        "`/opt/cleanup.sh` every Monday at 04:00.",
        checks=[
            FileMatches(
                "backup line",
                path="crontab.txt",
                patterns=(r"^30\s+0?2\s+\*\s+\*\s+\*\s+/opt/backup\.sh\s*$",),
            ),
            FileMatches(
                "cleanup line",
                path="crontab.txt",
                patterns=(r"^0?0\s+0?4\s+\*\s+\*\s+(1|[Mm][Oo][Nn])\s+/opt/cleanup\.sh\s*$",),
            ),
        ],
        tags=("cron",),
        split="test",
    ),
    Task(
        "seta-tax-constant",
        "Medium",
        "software-engineering",
        "Refactor `shop.py`: introduce a module-level constant `TAX_RATE = 0.2` and use it instead of every "
        "literal `0.2`. Behaviour must not change.",
        files={"shop.py": _SHOP_PY},
        checks=[
            python_check("constant", "import shop\nassert shop.TAX_RATE == 0.2"),
            python_check(
                "no literal left", "src = open('shop.py').read()\nassert src.count('0.2') == 1, src"
            ),
            python_check(
                "behaviour",
                "import shop\nassert shop.price_with_tax(10) == 12.0\n"
                "assert shop.tax_of(10) == 2.0\nassert shop.net_from_gross(12) == 10.0\n"
                "shop.TAX_RATE = 0.5\nassert shop.tax_of(10) == 5.0",
                2,
            ),
        ],
        tags=("python", "refactoring"),
    ),
    Task(
        "seta-word-index",
        "Medium",
        "data-processing",
        "Write `index.py`: `python3 index.py FILE` prints every distinct word of FILE (lower-cased; words "
        "are runs of ASCII letters) with the line numbers it occurs on, as `word: 1,3`, words sorted "
        "alphabetically.",
        files={"sample.txt": "The cat\nthe dog\nA cat, a DOG.\n"},
        checks=[
            Command(
                "sample.txt", cmd="python3 index.py sample.txt", output="a: 3\ncat: 1,3\ndog: 2,3\nthe: 1,2"
            ),
            Command(
                "another file",
                2,
                output="bar: 2\nfoo: 1,2,4",
                cmd="f=$(mktemp) && printf 'Foo!\\nbar foo foo\\n\\nFOO\\n' > $f && python3 index.py $f",
            ),
        ],
        tags=("python", "text"),
        split="test",
    ),
    # ── Hard ──
    Task(
        "seta-lru-cache",
        "Hard",
        "software-engineering",
        "Implement `LRUCache(capacity)` in `lru.py` with `get(key)` (the value, or -1 when absent) and "
        "`put(key, value)`; when full, `put` of a new key evicts the least recently used key (a `get` or "
        "`put` counts as a use).",
        files={
            "lru.py": "class LRUCache:\n    def __init__(self, capacity):\n"
            "        raise NotImplementedError\n"
        },
        checks=[
            python_check(
                "basic",
                "from lru import LRUCache\nc = LRUCache(2)\nc.put(1, 1)\nassert c.get(1) == 1\n"
                "assert c.get(2) == -1",
            ),
            python_check(
                "eviction",
                "from lru import LRUCache\nc = LRUCache(2)\nc.put(1, 1); c.put(2, 2)\n"
                "c.get(1)\nc.put(3, 3)\nassert c.get(2) == -1\nassert c.get(1) == 1\n"
                "assert c.get(3) == 3",
                2,
            ),
            python_check(
                "update refreshes",
                "from lru import LRUCache\nc = LRUCache(2)\nc.put(1, 1); c.put(2, 2)\n"
                "c.put(1, 10)\nc.put(3, 3)\nassert c.get(1) == 10\nassert c.get(2) == -1",
            ),
        ],
        tags=("python", "data-structures"),
    ),
    Task(
        "seta-binary-search",
        "Hard",
        "debugging",
        "`search.py`'s `find(items, target)` (binary search on an ascending list) loops forever or misses "
        "items. Fix it: it returns the index of target, or -1.",
        files={"search.py": _SEARCH_PY},
        checks=[
            python_check(
                "ends",
                "from search import find\nxs = [1, 3, 5, 7, 9]\nassert find(xs, 1) == 0\n"
                "assert find(xs, 9) == 4",
            ),
            python_check(
                "missing",
                "from search import find\nassert find([1, 3, 5], 4) == -1\n"
                "assert find([], 1) == -1\nassert find([1, 3, 5], 6) == -1",
            ),
            python_check(
                "every element",
                "from search import find\nxs = list(range(0, 3000, 3))\n"
                "assert all(find(xs, x) == i for i, x in enumerate(xs))",
                2,
            ),
        ],
        tags=("python", "algorithms", "bugfix"),
    ),
    Task(
        "seta-matrix",
        "Hard",
        "scientific-computing",
        "Implement in `matrix.py` (lists of lists, no numpy): `transpose(m)`, `matmul(a, b)` and "
        "`determinant(m)` for square matrices (exact for integer input).",
        files={
            "matrix.py": "def transpose(m):\n    raise NotImplementedError\n\n\ndef matmul(a, b):\n"
            "    raise NotImplementedError\n\n\ndef determinant(m):\n    raise NotImplementedError\n"
        },
        checks=[
            python_check(
                "transpose",
                "from matrix import transpose\nassert transpose([[1, 2, 3], [4, 5, 6]]) == "
                "[[1, 4], [2, 5], [3, 6]]",
            ),
            python_check(
                "matmul",
                "from matrix import matmul\nassert matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == "
                "[[19, 22], [43, 50]]\nassert matmul([[1, 2, 3]], [[1], [2], [3]]) == [[14]]",
            ),
            python_check(
                "determinant",
                "from matrix import determinant\nassert determinant([[2]]) == 2\n"
                "assert determinant([[1, 2], [3, 4]]) == -2\n"
                "assert determinant([[2, 0, 1], [1, 3, 2], [1, 1, 2]]) == 6\n"
                "assert determinant([[1, 2, 3, 4], [5, 6, 7, 8], [2, 6, 4, 8], [3, 1, 1, 2]]) == 72",
                2,
            ),
        ],
        tags=("python", "math", "linear-algebra"),
    ),
    Task(
        "seta-top-paths",
        "Hard",
        "data-processing",
        "Write `report.sh`: `bash report.sh LOG` prints the 3 most requested paths of LOG (lines "
        "`IP METHOD PATH STATUS`) as `COUNT PATH`, count descending, ties by path ascending.",
        files={"access.log": _ACCESS},
        checks=[
            Command("on access.log", 2, cmd="bash report.sh access.log", output="3 /a\n3 /b\n2 /c"),
            Command(
                "on another log",
                2,
                output="2 /y\n2 /z\n1 /w",
                cmd="f=$(mktemp) && printf '1 GET /z 200\\n1 GET /x 200\\n2 GET /y 200\\n3 GET /z 404\\n"
                "4 GET /y 200\\n5 GET /w 200\\n' > $f && bash report.sh $f",
            ),
        ],
        tags=("bash", "awk", "logs"),
    ),
    Task(
        "seta-validate-json",
        "Hard",
        "software-engineering",
        "Write `validate.py`: `python3 validate.py FILE` exits 0 when FILE is a JSON array of objects that "
        "each have `name` (a non-empty string) and `age` (an integer from 0 to 150); otherwise it prints an "
        "error message and exits 1.",
        checks=[
            Command(
                "accepts valid",
                cmd='f=$(mktemp) && echo \'[{"name": "a", "age": 3}, '
                '{"name": "b", "age": 150}]\' > $f && python3 validate.py $f',
            ),
            Command(
                "rejects bad age",
                cmd='f=$(mktemp) && echo \'[{"name": "a", "age": 151}]\' > $f && ! python3 validate.py $f',
            ),
            Command(
                "rejects missing name",
                cmd="f=$(mktemp) && echo '[{\"age\": 3}]' > $f && ! python3 validate.py $f",
            ),
            Command("rejects non-JSON", cmd="f=$(mktemp) && echo 'nope' > $f && ! python3 validate.py $f"),
            Command(
                "rejects bool age",
                cmd='f=$(mktemp) && echo \'[{"name": "a", "age": true}]\' > $f && ! python3 validate.py $f',
            ),
        ],
        tags=("python", "json", "validation"),
    ),
    Task(
        "seta-roman",
        "Hard",
        "software-engineering",
        "Implement `to_roman(n)` and `from_roman(s)` in `roman.py` for 1..3999 (standard subtractive form, "
        "e.g. 1994 = MCMXCIV); both raise ValueError for invalid input (0, 4000, 'IIII', 'ABC').",
        files={
            "roman.py": "def to_roman(n):\n    raise NotImplementedError\n\n\ndef from_roman(s):\n"
            "    raise NotImplementedError\n"
        },
        checks=[
            python_check(
                "to_roman",
                "from roman import to_roman\nassert to_roman(1994) == 'MCMXCIV'\n"
                "assert to_roman(4) == 'IV' and to_roman(3999) == 'MMMCMXCIX'",
            ),
            python_check(
                "from_roman",
                "from roman import from_roman\nassert from_roman('MCMXCIV') == 1994\n"
                "assert from_roman('XLII') == 42",
            ),
            python_check(
                "round trip",
                "from roman import to_roman, from_roman\n"
                "assert all(from_roman(to_roman(i)) == i for i in range(1, 4000))",
            ),
            python_check(
                "invalid",
                "from roman import to_roman, from_roman\n"
                "for bad in (lambda: to_roman(0), lambda: to_roman(4000), "
                "lambda: from_roman('IIII'), lambda: from_roman('ABC')):\n"
                "    try:\n        bad()\n    except ValueError:\n        continue\n"
                "    raise SystemExit('no ValueError')",
            ),
        ],
        tags=("python", "parsing"),
    ),
    Task(
        "seta-fix-precedence",
        "Hard",
        "debugging",
        "`calc_eval.py`'s `evaluate(expr)` ignores operator precedence: `evaluate('2+3*4')` gives 20 instead "
        "of 14. Fix it so that * and / bind tighter than + and -, all operators are left-associative, and "
        "parentheses still work.",
        files={"calc_eval.py": _CALC_EVAL_PY},
        checks=[
            python_check(
                "precedence",
                "from calc_eval import evaluate\nassert evaluate('2+3*4') == 14\n"
                "assert evaluate('10-6/2') == 7",
                2,
            ),
            python_check("parentheses", "from calc_eval import evaluate\nassert evaluate('(2+3)*4') == 20"),
            python_check(
                "left-assoc",
                "from calc_eval import evaluate\nassert evaluate('8/4/2') == 1\n"
                "assert evaluate('10-3-2') == 5",
            ),
        ],
        tags=("python", "parsing", "bugfix"),
    ),
    Task(
        "seta-login-users",
        "Hard",
        "system-administration",
        "`passwd.txt` is in /etc/passwd format. Write `users.txt` with the login names of the users whose "
        "UID is at least 1000 and whose shell is neither `/usr/sbin/nologin` nor `/bin/false`, sorted by UID "
        "(numerically), one per line.",
        files={"passwd.txt": _PASSWD},
        checks=[
            Exists("file exists", paths=("users.txt",)),
            FileEquals("users", 3, path="users.txt", expected="mia\nadam\nzoe\n"),
        ],
        tags=("bash", "awk", "users"),
    ),
    Task(
        "seta-mirror-dir",
        "Hard",
        "file-operations",
        "Make `mirror/` an exact copy of `source/` (recursively): same files with the same content, and no "
        "files in `mirror/` that are not in `source/`. Do not change `source/`.",
        files={
            "source/a.txt": "A\n",
            "source/sub/b.txt": "B\n",
            "source/sub/deep/c.txt": "C\n",
            "mirror/a.txt": "old A\n",
            "mirror/stale.txt": "stale\n",
            "mirror/sub/old/x.txt": "x\n",
        },
        checks=[
            Command("identical trees", 2, cmd="diff -r source mirror"),
            Exists("stale files gone", paths=("mirror/stale.txt", "mirror/sub/old/x.txt"), present=False),
            FileEquals("source unchanged", path="source/a.txt", expected="A\n"),
        ],
        tags=("bash", "sync"),
    ),
    Task(
        "seta-merge-intervals",
        "Hard",
        "software-engineering",
        "Implement `merge(intervals)` in `intervals.py`: given `[start, end]` pairs in any order, return the "
        "merged, sorted list of lists; intervals that touch (`[1, 2]`, `[2, 3]`) merge too.",
        files={"intervals.py": "def merge(intervals):\n    raise NotImplementedError\n"},
        checks=[
            python_check(
                "overlap",
                "from intervals import merge\nassert merge([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]",
            ),
            python_check(
                "unsorted and touching",
                "from intervals import merge\nassert merge([[5, 7], [1, 2], [2, 4]]) == [[1, 4], [5, 7]]",
                2,
            ),
            python_check(
                "empty and nested",
                "from intervals import merge\nassert merge([]) == []\n"
                "assert merge([[1, 10], [2, 3]]) == [[1, 10]]",
            ),
        ],
        tags=("python", "algorithms"),
        split="test",
    ),
    Task(
        "seta-build-order",
        "Hard",
        "software-engineering",
        "`deps.txt` lists packages as `NAME: DEP DEP ...`. Write `order.txt`, one package per line, such "
        "that every package comes after its dependencies; whenever several packages are ready, take the "
        "alphabetically smallest first.",
        files={"deps.txt": _DEPS},
        checks=[
            FileEquals("order", 3, path="order.txt", expected="core\ndocs\nlib\nutils\napp\ncli\n"),
            python_check(
                "all packages once",
                "names = open('order.txt').read().split()\n"
                "assert sorted(names) == ['app', 'cli', 'core', 'docs', 'lib', 'utils']",
            ),
        ],
        tags=("python", "graphs"),
    ),
    Task(
        "seta-memoize",
        "Hard",
        "software-engineering",
        "Implement the decorator `memoize` in `memo.py`: the wrapped function caches results by its "
        "positional and keyword arguments (calling the original once per distinct arguments), and the "
        "wrapper has a `cache_clear()` method that empties the cache.",
        files={"memo.py": "def memoize(fn):\n    raise NotImplementedError\n"},
        checks=[
            python_check(
                "caches",
                "from memo import memoize\ncalls = []\n@memoize\ndef sq(x):\n"
                "    calls.append(x)\n    return x * x\nassert sq(3) == 9 and sq(3) == 9\n"
                "assert calls == [3]",
                2,
            ),
            python_check(
                "kwargs",
                "from memo import memoize\ncalls = []\n@memoize\ndef f(a, b=1):\n"
                "    calls.append((a, b))\n    return a + b\nassert f(1, b=2) == 3\n"
                "assert f(1, b=2) == 3\nassert f(1, b=5) == 6\nassert len(calls) == 2",
            ),
            python_check(
                "cache_clear",
                "from memo import memoize\ncalls = []\n@memoize\ndef g(x):\n"
                "    calls.append(x)\n    return x\ng(1); g.cache_clear(); g(1)\n"
                "assert calls == [1, 1]",
            ),
        ],
        tags=("python", "decorators"),
        split="test",
    ),
]
