"""Reference (and near-miss) solutions for every task of `local:terminals` and `local:seta`, as tool calls.

``*_REFERENCE[task_id]`` earns reward 1.0. ``TERMINALS_WRONG[task_id]`` is a plausible near miss that earns
0.0; ``SETA_WRONG[task_id]`` is ``(expected reward, calls)``, the reward being the weighted fraction of checks
the near miss still passes. Every list ends before the submit tool (``submit`` / ``submit_solution``).

They ship in the package for the supervised warm start (`ormix.workbench._warmup`: `reference_for`, and
`near_miss_for` when it also demonstrates mistakes) and back the scripted tests.

Example:
    >>> from ormix.workbench.envs.solutions import SETA_REFERENCE, reference_for
    >>> SETA_REFERENCE["seta-hello-file"]
    [('write', {'file_path': 'hello.txt', 'content': 'Hello, SETA!\\n'})]
    >>> reference_for("local:terminals")({"task_id": "files-mkdir-note"})[-1]
    ('submit', {})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ormix.workbench.envs.tasks.ops_tasks import OPS_NEAR_MISS, OPS_REFERENCE


def B(command: str) -> tuple[str, dict]:
    return ("bash", {"command": command})


def F(path: str, content: str) -> tuple[str, dict]:
    return ("create_file", {"path": path, "content": content})


def R(path: str, old: str, new: str) -> tuple[str, dict]:
    return ("str_replace", {"path": path, "old_str": old, "new_str": new})


_GREET = '#!/bin/bash\necho "Hello, ${1:-world}!"\n'
_FIZZ = (
    "import sys\n\nfor i in range(1, int(sys.argv[1]) + 1):\n"
    "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n"
)
_CSV2JSON = (
    "import csv, json\nrows = [{'name': r['name'], 'qty': int(r['qty']), 'price': float(r['price'])}\n"
    "        for r in csv.DictReader(open('inventory.csv'))]\njson.dump(rows, open('inventory.json', 'w'))\n"
)
_RENAME = (
    '#!/bin/bash\ndir=$1; from=$2; to=$3\nfor f in "$dir"/*."$from"; do\n  [ -e "$f" ] || continue\n'
    '  mv -- "$f" "${f%.$from}.$to"\ndone\n'
)

TERMINALS_REFERENCE: dict[str, list[tuple[str, dict]]] = {
    "files-mkdir-note": [B("mkdir -p notes && echo 'buy milk' > notes/todo.txt")],
    "files-copy-backup": [B("mkdir -p backup && cp config/app.conf backup/app.conf.bak")],
    "files-rename-logs": [B('for f in logs/*.log; do mv "$f" "$f.old"; done')],
    "files-delete-tmp": [B("find project -type f -name '*.tmp' -delete")],
    "files-make-executable": [B("chmod +x run.sh")],
    "files-append-line": [B("echo 'export EDITOR=vim' >> profile.sh")],
    "text-count-lines": [B("wc -l < data.txt > count.txt")],
    "text-grep-errors": [B("grep ERROR app.log > errors.txt")],
    "text-uppercase": [B("tr '[:lower:]' '[:upper:]' < words.txt > upper.txt")],
    "text-line-range": [B("sed -n '5,9p' poem.txt > middle.txt")],
    "text-sort-unique": [B("sort -u names.txt > unique.txt")],
    "text-word-frequency": [
        B(
            "tr -s ' \\n' '\\n' < text.txt | sort | uniq -c | awk '{print $1, $2}' "
            "| sort -k1,1nr -k2,2 > freq.txt"
        )
    ],
    "text-csv-sum": [B("awk -F, 'NR > 1 {s += $3} END {print s}' sales.csv > total.txt")],
    "text-https": [B("sed -i 's#http://#https://#g' site.conf")],
    "text-awk-filter": [B("awk -F, 'NR > 1 && $2 > 30 {print $1}' users.csv > older.txt")],
    "text-extract-emails": [
        B("grep -oE '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]+' contacts.txt | sort -u > emails.txt")
    ],
    "text-top-ip": [
        B(
            "awk '{print $1}' access.log | sort | uniq -c | sort -k1,1nr | head -n 1 "
            "| awk '{print $2, $1}' > top_ip.txt"
        )
    ],
    "text-paste-pairs": [B("paste -d: ids.txt names.txt > pairs.txt")],
    "files-find-large": [B("find data -type f -size +1000c | sort > large.txt")],
    "text-json-port": [
        B("python3 -c \"import json; print(json.load(open('config.json'))['database']['port'])\" > port.txt")
    ],
    "script-greet": [F("greet.sh", _GREET), B("chmod +x greet.sh")],
    "script-fizzbuzz": [F("fizzbuzz.py", _FIZZ)],
    "script-sum-stdin": [F("sum.sh", "s=0\nwhile read -r n; do s=$((s + n)); done\necho $s\n")],
    "script-fix-count": [R("count_txt.sh", '"$1"/*.text', '"$1"/*.txt')],
    "text-log-levels": [
        B("awk '{print $2}' server.log | sort | uniq -c | awk '{print $2, $1}' > report.txt")
    ],
    "text-dedupe-csv": [B("awk -F, '!seen[$1]++' records.csv > dedup.csv")],
    "files-archive": [B("tar -czf backup.tar.gz src")],
    "script-csv-to-json": [F("convert.py", _CSV2JSON), B("python3 convert.py")],
    "script-rename-ext": [F("rename_ext.sh", _RENAME)],
    "text-merge-sorted": [B("sort -n a.txt b.txt > merged.txt")],
    "files-ini-update": [
        B("sed -i '/^\\[server\\]/,/^\\[/ s/^port=80$/port=8080\\ntimeout=30/' settings.ini")
    ],
    "text-todo-report": [
        B("grep -rn --include='*.py' TODO src | cut -d: -f1,2 | LC_ALL=C sort > todo_report.txt")
    ],
    "files-checksums": [B("cd files && sha256sum * > SHA256SUMS")],
    "text-transpose": [
        B(
            'awk \'{for (i = 1; i <= NF; i++) m[i] = (NR == 1 ? $i : m[i] " " $i)} '
            "END {for (i = 1; i <= NF; i++) print m[i]}' matrix.txt > transposed.txt"
        )
    ],
}

TERMINALS_WRONG: dict[str, list[tuple[str, dict]]] = {
    "files-mkdir-note": [B("mkdir -p notes && echo 'buy eggs' > notes/todo.txt")],
    "files-copy-backup": [B("mkdir -p backup && mv config/app.conf backup/app.conf.bak")],
    "files-rename-logs": [B("mv logs/a.log logs/a.log.old")],
    "files-delete-tmp": [B("rm -f project/*.tmp")],
    "files-make-executable": [B("bash run.sh")],
    "files-append-line": [B("echo 'export EDITOR=vim' > profile.sh")],
    "text-count-lines": [B("wc -l data.txt > count.txt")],
    "text-grep-errors": [B("grep -i error app.log > errors.txt")],
    "text-uppercase": [B("cp words.txt upper.txt")],
    "text-line-range": [B("sed -n '5,10p' poem.txt > middle.txt")],
    "text-sort-unique": [B("uniq names.txt > unique.txt")],
    "text-word-frequency": [
        B("tr -s ' \\n' '\\n' < text.txt | sort | uniq -c | awk '{print $2, $1}' > freq.txt")
    ],
    "text-csv-sum": [B("tail -n +2 sales.csv | wc -l > total.txt")],
    "text-https": [B("sed -i 's#http://#https://#' site.conf")],
    "text-awk-filter": [B("awk -F, 'NR > 1 && $2 >= 30 {print $1}' users.csv > older.txt")],
    "text-extract-emails": [
        B("grep -oE '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]+' contacts.txt > emails.txt")
    ],
    "text-top-ip": [B("head -n 1 access.log | awk '{print $1, 1}' > top_ip.txt")],
    "text-paste-pairs": [B("paste ids.txt names.txt > pairs.txt")],
    "files-find-large": [B("find data -maxdepth 1 -type f -size +1000c | sort > large.txt")],
    "text-json-port": [
        B("python3 -c \"import json; print(json.load(open('config.json'))['server']['port'])\" > port.txt")
    ],
    "script-greet": [F("greet.sh", '#!/bin/bash\necho "Hello, $1!"\n'), B("chmod +x greet.sh")],
    "script-fizzbuzz": [F("fizzbuzz.py", _FIZZ.replace("int(sys.argv[1]) + 1", "int(sys.argv[1])"))],
    "script-sum-stdin": [F("sum.sh", "wc -l\n")],
    "script-fix-count": [R("count_txt.sh", '"$1"/*.text', '"$1"/*')],
    "text-log-levels": [
        B("grep -o '[A-Z][A-Z]*' server.log | sort | uniq -c | awk '{print $2, $1}' > report.txt")
    ],
    "text-dedupe-csv": [B("sort -t, -k1,1 -u records.csv > dedup.csv")],
    "files-archive": [B("tar -czf backup.tar.gz -C src .")],
    "script-csv-to-json": [
        F("convert.py", _CSV2JSON.replace("int(r['qty'])", "r['qty']")),
        B("python3 convert.py"),
    ],
    "script-rename-ext": [
        F("rename_ext.sh", '#!/bin/bash\nfor f in $(ls "$1"/*.$2); do mv $f ${f%.$2}.$3; done\n')
    ],
    "text-merge-sorted": [B("sort a.txt b.txt > merged.txt")],
    "files-ini-update": [B("sed -i 's/^port=80$/port=8080\\ntimeout=30/' settings.ini")],
    "text-todo-report": [B("grep -rn TODO src | cut -d: -f1,2 | LC_ALL=C sort > todo_report.txt")],
    "files-checksums": [B("cd files && md5sum * > SHA256SUMS")],
    "text-transpose": [B("cp matrix.txt transposed.txt")],
}


def W(path: str, content: str) -> tuple[str, dict]:
    return ("write", {"file_path": path, "content": content})


def E(path: str, old: str, new: str) -> tuple[str, dict]:
    return ("edit", {"file_path": path, "old_string": old, "new_string": new})


_SLUG = "import re\n\n\ndef slugify(text):\n    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')\n"
_STATS = (
    "import csv, json\nrows = list(csv.DictReader(open('scores.csv')))\n"
    "scores = [int(r['score']) for r in rows]\n"
    "best = max(rows, key=lambda r: int(r['score']))['name']\n"
    "json.dump({'count': len(rows), 'mean': round(sum(scores) / len(scores), 2), 'max_name': best},"
    " open('stats.json', 'w'))\n"
)
_BACKUP = (
    '#!/bin/bash\nsrc=$1; dest=$2\nmkdir -p "$dest"\nn=0\nfor f in "$src"/*.conf; do\n'
    '  [ -e "$f" ] || continue\n  cp "$f" "$dest"/ && n=$((n + 1))\ndone\necho $n\n'
)
_INVENTORY_FIX = [
    E(
        "inventory.py",
        "        self.items[name] = self.items[name] - qty",
        "        if self.count(name) < qty:\n"
        "            raise ValueError(f'only {self.count(name)} {name} in stock')\n"
        "        self.items[name] = self.items[name] - qty",
    ),
    E("inventory.py", "return self.items[name]", "return self.items.get(name, 0)"),
]
_INI2JSON = (
    "import configparser, json\ncp = configparser.ConfigParser()\ncp.read('settings.ini')\n"
    "json.dump({s: dict(cp[s]) for s in cp.sections()}, open('settings.json', 'w'), indent=2)\n"
)
_DUPS = (
    "import hashlib, os\ngroups = {}\nfor root, _, files in os.walk('docs'):\n    for f in files:\n"
    "        p = os.path.join(root, f)\n        groups.setdefault(hashlib.sha256(open(p, 'rb').read())"
    ".hexdigest(), []).append(p)\n"
    "lines = sorted(' '.join(sorted(g)) for g in groups.values() if len(g) > 1)\n"
    "open('duplicates.txt', 'w').write(''.join(line + '\\n' for line in lines))\n"
)
_SHOP_FIXED = """\
TAX_RATE = 0.2


def price_with_tax(price):
    return round(price * (1 + TAX_RATE), 2)


def tax_of(price):
    return round(price * TAX_RATE, 2)


def net_from_gross(gross):
    return round(gross / (1 + TAX_RATE), 2)
"""
_INDEX = (
    "import re, sys\nlines = {}\nfor n, line in enumerate(open(sys.argv[1]), 1):\n"
    "    for w in re.findall('[a-z]+', line.lower()):\n        lines.setdefault(w, [])\n"
    "        if n not in lines[w]:\n            lines[w].append(n)\n"
    "for w in sorted(lines):\n    print(f\"{w}: {','.join(map(str, lines[w]))}\")\n"
)
_LRU = (
    "from collections import OrderedDict\n\n\nclass LRUCache:\n    def __init__(self, capacity):\n"
    "        self.capacity = capacity\n        self.data = OrderedDict()\n\n    def get(self, key):\n"
    "        if key not in self.data:\n            return -1\n        self.data.move_to_end(key)\n"
    "        return self.data[key]\n\n    def put(self, key, value):\n        self.data[key] = value\n"
    "        self.data.move_to_end(key)\n        if len(self.data) > self.capacity:\n"
    "            self.data.popitem(last=False)\n"
)
_MATRIX = """\
def transpose(m):
    return [list(col) for col in zip(*m)]


def matmul(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def determinant(m):
    if len(m) == 1:
        return m[0][0]
    return sum((-1) ** j * m[0][j] * determinant([row[:j] + row[j + 1:] for row in m[1:]])
               for j in range(len(m)))
"""
_REPORT = (
    "#!/bin/bash\nawk '{print $3}' \"$1\" | sort | uniq -c | awk '{print $1, $2}' "
    "| sort -k1,1nr -k2,2 | head -n 3\n"
)
_VALIDATE = """\
import json
import sys


def fail(msg):
    print(msg)
    sys.exit(1)


try:
    data = json.load(open(sys.argv[1]))
except ValueError as e:
    fail(f"not JSON: {e}")
if not isinstance(data, list):
    fail("not a list")
for i, item in enumerate(data):
    if not isinstance(item, dict):
        fail(f"item {i} is not an object")
    name, age = item.get("name"), item.get("age")
    if not isinstance(name, str) or not name:
        fail(f"item {i}: bad name")
    if not isinstance(age, int) or isinstance(age, bool) or not 0 <= age <= 150:
        fail(f"item {i}: bad age")
"""
_ROMAN = """\
PAIRS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
         (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    if not isinstance(n, int) or not 1 <= n <= 3999:
        raise ValueError(n)
    out = ""
    for value, sym in PAIRS:
        while n >= value:
            out += sym
            n -= value
    return out


def from_roman(s):
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    if not s or any(c not in values for c in s):
        raise ValueError(s)
    total = 0
    for i, c in enumerate(s):
        v = values[c]
        total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v
    if not 1 <= total <= 3999 or to_roman(total) != s:
        raise ValueError(s)
    return total
"""
_PRECEDENCE_OLD = """    def expression():
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
"""
_PRECEDENCE_NEW = """    def term():
        value = atom()
        while peek() in ("*", "/"):
            op = take()
            rhs = atom()
            value = value * rhs if op == "*" else value / rhs
        return value

    def expression():
        value = term()
        while peek() in ("+", "-"):
            op = take()
            rhs = term()
            value = value + rhs if op == "+" else value - rhs
        return value
"""
_INTERVALS = (
    "def merge(intervals):\n    out = []\n    for s, e in sorted(intervals):\n"
    "        if out and s <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n"
    "        else:\n            out.append([s, e])\n    return out\n"
)
_ORDER = (
    "import heapq\ndeps = {}\nfor line in open('deps.txt'):\n    name, _, rest = line.partition(':')\n"
    "    deps[name.strip()] = set(rest.split())\nready = [n for n, d in deps.items() if not d]\n"
    "heapq.heapify(ready)\norder = []\nwhile ready:\n    n = heapq.heappop(ready)\n    order.append(n)\n"
    "    for m, d in deps.items():\n        if n in d:\n            d.discard(n)\n"
    "            if not d:\n                heapq.heappush(ready, m)\n"
    "open('order.txt', 'w').write(''.join(n + '\\n' for n in order))\n"
)
_MEMO = (
    "import functools\n\n\ndef memoize(fn):\n    cache = {}\n\n    @functools.wraps(fn)\n"
    "    def wrapper(*args, **kwargs):\n        key = (args, tuple(sorted(kwargs.items())))\n"
    "        if key not in cache:\n            cache[key] = fn(*args, **kwargs)\n"
    "        return cache[key]\n\n"
    "    wrapper.cache_clear = cache.clear\n    return wrapper\n"
)

SETA_REFERENCE: dict[str, list[tuple[str, dict]]] = {
    "seta-hello-file": [W("hello.txt", "Hello, SETA!\n")],
    "seta-fix-add": [("read", {"file_path": "calc.py"}), E("calc.py", "return a - b", "return a + b")],
    "seta-count-words": [B("wc -w < essay.txt > wordcount.txt")],
    "seta-env-file": [
        (
            "multi_edit",
            {
                "file_path": ".env",
                "edits": [
                    {"old_string": "DEBUG=true", "new_string": "DEBUG=false"},
                    {
                        "old_string": "DB_URL=postgres://db/shop",
                        "new_string": "DB_URL=postgres://db/shop\nLOG_LEVEL=warning",
                    },
                ],
            },
        )
    ],
    "seta-bump-version": [E("package.json", '"version": "1.2.3"', '"version": "1.2.4"')],
    "seta-gitignore": [W(".gitignore", "__pycache__/\n*.pyc\n.env\n")],
    "seta-slugify": [W("text_utils.py", _SLUG)],
    "seta-fix-pagination": [E("pagination.py", "(n + 1) * size - 1]", "(n + 1) * size]")],
    "seta-csv-stats": [W("stats.py", _STATS), B("python3 stats.py")],
    "seta-errors-by-hour": [
        B(
            "grep ERROR app.log | awk '{print substr($2, 1, 2)}' | sort | uniq -c "
            "| awk '{print $2, $1}' > errors_by_hour.txt"
        )
    ],
    "seta-backup-script": [W("backup.sh", _BACKUP)],
    "seta-fix-import": [B("mv app/helper.py app/helpers.py")],
    "seta-inventory-tests": _INVENTORY_FIX,
    "seta-ini-to-json": [W("convert.py", _INI2JSON), B("python3 convert.py")],
    "seta-find-duplicates": [W("dups.py", _DUPS), B("python3 dups.py")],
    "seta-crontab": [W("crontab.txt", "30 2 * * * /opt/backup.sh\n0 4 * * 1 /opt/cleanup.sh\n")],
    "seta-tax-constant": [W("shop.py", _SHOP_FIXED)],
    "seta-word-index": [W("index.py", _INDEX)],
    "seta-lru-cache": [W("lru.py", _LRU)],
    "seta-binary-search": [
        (
            "multi_edit",
            {
                "file_path": "search.py",
                "edits": [
                    {"old_string": "lo = mid\n", "new_string": "lo = mid + 1\n"},
                    {"old_string": "hi = mid - 1", "new_string": "hi = mid"},
                ],
            },
        )
    ],
    "seta-matrix": [W("matrix.py", _MATRIX)],
    "seta-top-paths": [W("report.sh", _REPORT)],
    "seta-validate-json": [W("validate.py", _VALIDATE)],
    "seta-roman": [W("roman.py", _ROMAN)],
    "seta-fix-precedence": [E("calc_eval.py", _PRECEDENCE_OLD, _PRECEDENCE_NEW)],
    "seta-login-users": [
        B(
            'awk -F: \'$3 >= 1000 && $7 != "/usr/sbin/nologin" && $7 != "/bin/false" '
            "{print $3, $1}' passwd.txt | sort -n | awk '{print $2}' > users.txt"
        )
    ],
    "seta-mirror-dir": [B("rm -rf mirror && cp -r source mirror")],
    "seta-merge-intervals": [W("intervals.py", _INTERVALS)],
    "seta-build-order": [W("order.py", _ORDER), B("python3 order.py")],
    "seta-memoize": [W("memo.py", _MEMO)],
}

# (expected reward, calls). Weights are in src/ormix/server/tasks/seta_tasks.py.
SETA_WRONG: dict[str, tuple[float, list[tuple[str, dict]]]] = {
    "seta-hello-file": (1 / 3, [W("hello.txt", "Hello SETA\n")]),
    "seta-fix-add": (0.0, [E("calc.py", "return a * b", "return a + b")]),  # breaks mul, add still wrong
    "seta-count-words": (0.25, [B("wc -l < essay.txt > wordcount.txt")]),
    "seta-env-file": (2 / 3, [E(".env", "DEBUG=true", "DEBUG=false")]),
    "seta-bump-version": (0.0, [E("package.json", '"version": "1.2.3"', '"version": "1.3.0"')]),
    "seta-gitignore": (2 / 3, [W(".gitignore", "__pycache__\n*.pyc\n.env\n")]),
    "seta-slugify": (
        0.0,
        [W("text_utils.py", "def slugify(text):\n    return text.lower().replace(' ', '-')\n")],
    ),
    "seta-fix-pagination": (
        2 / 3,
        [
            W(
                "pagination.py",
                "def page(items, n, size):\n    return items[n * size:(n + 1) * size] if n < 3 else []\n",
            )
        ],
    ),
    "seta-csv-stats": (
        2 / 3,
        [
            W("stats.py", _STATS.replace("round(sum(scores) / len(scores), 2)", "sum(scores)")),
            B("python3 stats.py"),
        ],
    ),
    "seta-errors-by-hour": (0.25, [B("grep -c ERROR app.log > errors_by_hour.txt")]),
    "seta-backup-script": (0.5, [W("backup.sh", _BACKUP.replace('"$src"/*.conf', '"$src"/*'))]),
    "seta-fix-import": (
        1 / 3,
        [
            B("cp app/helper.py app/helpers.py && sed -i 's/Hello, /Hi, /' app/helpers.py"),
            B("python3 -m app.main"),
        ],
    ),
    "seta-inventory-tests": (0.4, [_INVENTORY_FIX[1]]),
    "seta-ini-to-json": (
        1 / 3,
        [
            W(
                "settings.json",
                '{"server": {"host": "0.0.0.0", "port": 8000}, "db": {"name": "shop", "user": "admin"}}\n',
            )
        ],
    ),
    "seta-find-duplicates": (0.25, [B("md5sum docs/*.txt docs/sub/*.txt > duplicates.txt")]),
    "seta-crontab": (0.5, [W("crontab.txt", "30 2 * * * /opt/backup.sh\n0 4 * * 0 /opt/cleanup.sh\n")]),
    "seta-tax-constant": (
        0.25,
        [E("shop.py", "def price_with_tax", "TAX_RATE = 0.2\n\n\ndef price_with_tax")],
    ),
    "seta-word-index": (
        0.0,
        [W("index.py", _INDEX.replace("        if n not in lines[w]:\n            ", "        "))],
    ),
    "seta-lru-cache": (
        0.25,
        [
            W(
                "lru.py",
                _LRU.replace("        self.data.move_to_end(key)\n        return", "        return").replace(
                    "        self.data[key] = value\n        self.data.move_to_end(key)\n",
                    "        self.data[key] = value\n",
                ),
            )
        ],
    ),
    "seta-binary-search": (0.25, [W("search.py", "def find(items, target):\n    return -1\n")]),
    "seta-matrix": (0.5, [W("matrix.py", _MATRIX.replace("(-1) ** j * ", ""))]),
    "seta-top-paths": (0.0, [W("report.sh", _REPORT.replace("-k1,1nr -k2,2", "-nr"))]),
    "seta-validate-json": (0.8, [W("validate.py", _VALIDATE.replace(" or isinstance(age, bool)", ""))]),
    "seta-roman": (0.75, [W("roman.py", _ROMAN.replace(" or to_roman(total) != s", ""))]),
    "seta-fix-precedence": (0.5, [B("true")]),
    "seta-login-users": (0.25, [B("awk -F: '$3 >= 1000 {print $1}' passwd.txt > users.txt")]),
    "seta-mirror-dir": (0.25, [B("cp -r source/. mirror/")]),
    "seta-merge-intervals": (
        0.5,
        [W("intervals.py", _INTERVALS.replace("s <= out[-1][1]", "s < out[-1][1]"))],
    ),
    "seta-build-order": (0.25, [B("cut -d: -f1 deps.txt > order.txt")]),
    "seta-memoize": (0.75, [W("memo.py", _MEMO.replace("(args, tuple(sorted(kwargs.items())))", "args"))]),
}


#: target → (reference calls by task_id, name of the submit tool).
# The skill tasks (`ormix.workbench.envs.tasks.ops_tasks`): one bash command each, on both members' surfaces.
OPS_TERMINALS_REFERENCE = {k: [B(v)] for k, v in OPS_REFERENCE.items() if not k.startswith("seta-")}
OPS_TERMINALS_WRONG = {k: [B(v)] for k, v in OPS_NEAR_MISS.items() if not k.startswith("seta-")}
OPS_SETA_REFERENCE = {k: [B(v)] for k, v in OPS_REFERENCE.items() if k.startswith("seta-")}
OPS_SETA_WRONG = {k: [B(v)] for k, v in OPS_NEAR_MISS.items() if k.startswith("seta-")}

REFERENCES: dict[str, tuple[dict[str, list[tuple[str, dict]]], str]] = {
    "local:terminals": ({**TERMINALS_REFERENCE, **OPS_TERMINALS_REFERENCE}, "submit"),
    "local:seta": ({**SETA_REFERENCE, **OPS_SETA_REFERENCE}, "submit_solution"),
}

#: target → (near-miss calls by task_id, name of the submit tool).
NEAR_MISSES: dict[str, tuple[dict[str, list[tuple[str, dict]]], str]] = {
    "local:terminals": ({**TERMINALS_WRONG, **OPS_TERMINALS_WRONG}, "submit"),
    "local:seta": (
        {**{task: calls for task, (_, calls) in SETA_WRONG.items()}, **OPS_SETA_WRONG},
        "submit_solution",
    ),
}

#: A task's dataset row -> the tool calls of one attempt at it, the submit call included (None: no such
# attempt).
Solver = Callable[[Mapping[str, Any]], list[tuple[str, dict]] | None]


def _submitting(known: tuple[dict[str, list[tuple[str, dict]]], str]) -> Solver:
    solutions, submit = known

    def calls(row: Mapping[str, Any]) -> list[tuple[str, dict]] | None:
        found = solutions.get(row.get("task_id"))  # type: ignore[arg-type]
        return None if found is None else [*found, (submit, {})]

    return calls


def reference_for(target: str) -> Solver | None:
    """For a `local:` target that has reference solutions: a function from a task's dataset row to the calls
    that solve it, the final (submit) call included (``None`` for a task without one); else ``None``.

    Example:
        >>> reference_for("local:echo")({"word": "river"})
        [('submit', {'text': 'river'})]
        >>> reference_for("local:latency")({"word": "w3"})
        [('work', {'text': 'w3'}), ('submit', {'text': 'w3'})]
        >>> reference_for("local:terminals")({"task_id": "no-such-task"}) is None
        True
    """
    if target == "local:echo":
        return lambda row: [("submit", {"text": row["word"]})] if "word" in row else None
    if target == "local:latency":  # one slow call, then submit
        return lambda row: (
            [("work", {"text": row["word"]}), ("submit", {"text": row["word"]})] if "word" in row else None
        )
    known = REFERENCES.get(target)
    return None if known is None else _submitting(known)


def near_miss_for(target: str) -> Solver | None:
    """Like `reference_for`, for the near misses: a plausible attempt at the task that scores less than the
    reference (``local:terminals`` 0.0, ``local:seta`` the share of checks it still passes), submit included.
    ``None`` for targets without near misses (``local:echo``: its only way to fail is another word).

    Example:
        >>> near_miss_for("local:terminals")({"task_id": "files-mkdir-note"})
        [('bash', {'command': "mkdir -p notes && echo 'buy eggs' > notes/todo.txt"}), ('submit', {})]
        >>> near_miss_for("local:echo") is None
        True
    """
    known = NEAR_MISSES.get(target)
    return None if known is None else _submitting(known)
