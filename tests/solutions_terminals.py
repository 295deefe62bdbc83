"""Reference and wrong solutions for every `local:terminals` task, as lists of tool calls.

REFERENCE[task_id] earns reward 1.0; WRONG[task_id] is a plausible near miss that must earn 0.0.
Each list ends before `submit`, which the test adds.
"""

from __future__ import annotations


def B(command: str) -> tuple[str, dict]:
    return ("bash", {"command": command})


def F(path: str, content: str) -> tuple[str, dict]:
    return ("create_file", {"path": path, "content": content})


def R(path: str, old: str, new: str) -> tuple[str, dict]:
    return ("str_replace", {"path": path, "old_str": old, "new_str": new})


_GREET = '#!/bin/bash\necho "Hello, ${1:-world}!"\n'
_FIZZ = ("import sys\n\nfor i in range(1, int(sys.argv[1]) + 1):\n"
         "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n")
_CSV2JSON = ("import csv, json\nrows = [{'name': r['name'], 'qty': int(r['qty']), 'price': float(r['price'])}\n"
             "        for r in csv.DictReader(open('inventory.csv'))]\njson.dump(rows, open('inventory.json', 'w'))\n")
_RENAME = ('#!/bin/bash\ndir=$1; from=$2; to=$3\nfor f in "$dir"/*."$from"; do\n  [ -e "$f" ] || continue\n'
           '  mv -- "$f" "${f%.$from}.$to"\ndone\n')

REFERENCE: dict[str, list[tuple[str, dict]]] = {
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
    "text-word-frequency": [B("tr -s ' \\n' '\\n' < text.txt | sort | uniq -c | awk '{print $1, $2}' "
                              "| sort -k1,1nr -k2,2 > freq.txt")],
    "text-csv-sum": [B("awk -F, 'NR > 1 {s += $3} END {print s}' sales.csv > total.txt")],
    "text-https": [B("sed -i 's#http://#https://#g' site.conf")],
    "text-awk-filter": [B("awk -F, 'NR > 1 && $2 > 30 {print $1}' users.csv > older.txt")],
    "text-extract-emails": [B("grep -oE '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]+' contacts.txt "
                              "| sort -u > emails.txt")],
    "text-top-ip": [B("awk '{print $1}' access.log | sort | uniq -c | sort -k1,1nr | head -n 1 "
                      "| awk '{print $2, $1}' > top_ip.txt")],
    "text-paste-pairs": [B("paste -d: ids.txt names.txt > pairs.txt")],
    "files-find-large": [B("find data -type f -size +1000c | sort > large.txt")],
    "text-json-port": [B("python3 -c \"import json; print(json.load(open('config.json'))['database']['port'])\" "
                         "> port.txt")],
    "script-greet": [F("greet.sh", _GREET), B("chmod +x greet.sh")],
    "script-fizzbuzz": [F("fizzbuzz.py", _FIZZ)],
    "script-sum-stdin": [F("sum.sh", "s=0\nwhile read -r n; do s=$((s + n)); done\necho $s\n")],
    "script-fix-count": [R("count_txt.sh", '"$1"/*.text', '"$1"/*.txt')],
    "text-log-levels": [B("awk '{print $2}' server.log | sort | uniq -c | awk '{print $2, $1}' > report.txt")],
    "text-dedupe-csv": [B("awk -F, '!seen[$1]++' records.csv > dedup.csv")],
    "files-archive": [B("tar -czf backup.tar.gz src")],
    "script-csv-to-json": [F("convert.py", _CSV2JSON), B("python3 convert.py")],
    "script-rename-ext": [F("rename_ext.sh", _RENAME)],
    "text-merge-sorted": [B("sort -n a.txt b.txt > merged.txt")],
    "files-ini-update": [B("sed -i '/^\\[server\\]/,/^\\[/ s/^port=80$/port=8080\\ntimeout=30/' settings.ini")],
    "text-todo-report": [B("grep -rn --include='*.py' TODO src | cut -d: -f1,2 | LC_ALL=C sort > todo_report.txt")],
    "files-checksums": [B("cd files && sha256sum * > SHA256SUMS")],
    "text-transpose": [B("awk '{for (i = 1; i <= NF; i++) m[i] = (NR == 1 ? $i : m[i] \" \" $i)} "
                         "END {for (i = 1; i <= NF; i++) print m[i]}' matrix.txt > transposed.txt")],
}

WRONG: dict[str, list[tuple[str, dict]]] = {
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
    "text-word-frequency": [B("tr -s ' \\n' '\\n' < text.txt | sort | uniq -c | awk '{print $2, $1}' > freq.txt")],
    "text-csv-sum": [B("tail -n +2 sales.csv | wc -l > total.txt")],
    "text-https": [B("sed -i 's#http://#https://#' site.conf")],
    "text-awk-filter": [B("awk -F, 'NR > 1 && $2 >= 30 {print $1}' users.csv > older.txt")],
    "text-extract-emails": [B("grep -oE '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]+' contacts.txt > emails.txt")],
    "text-top-ip": [B("head -n 1 access.log | awk '{print $1, 1}' > top_ip.txt")],
    "text-paste-pairs": [B("paste ids.txt names.txt > pairs.txt")],
    "files-find-large": [B("find data -maxdepth 1 -type f -size +1000c | sort > large.txt")],
    "text-json-port": [B("python3 -c \"import json; print(json.load(open('config.json'))['server']['port'])\" "
                         "> port.txt")],
    "script-greet": [F("greet.sh", '#!/bin/bash\necho "Hello, $1!"\n'), B("chmod +x greet.sh")],
    "script-fizzbuzz": [F("fizzbuzz.py", _FIZZ.replace("int(sys.argv[1]) + 1", "int(sys.argv[1])"))],
    "script-sum-stdin": [F("sum.sh", "wc -l\n")],
    "script-fix-count": [R("count_txt.sh", '"$1"/*.text', '"$1"/*')],
    "text-log-levels": [B("grep -o '[A-Z][A-Z]*' server.log | sort | uniq -c | awk '{print $2, $1}' > report.txt")],
    "text-dedupe-csv": [B("sort -t, -k1,1 -u records.csv > dedup.csv")],
    "files-archive": [B("tar -czf backup.tar.gz -C src .")],
    "script-csv-to-json": [F("convert.py", _CSV2JSON.replace("int(r['qty'])", "r['qty']")), B("python3 convert.py")],
    "script-rename-ext": [F("rename_ext.sh", '#!/bin/bash\nfor f in $(ls "$1"/*.$2); do mv $f ${f%.$2}.$3; done\n')],
    "text-merge-sorted": [B("sort a.txt b.txt > merged.txt")],
    "files-ini-update": [B("sed -i 's/^port=80$/port=8080\\ntimeout=30/' settings.ini")],
    "text-todo-report": [B("grep -rn TODO src | cut -d: -f1,2 | LC_ALL=C sort > todo_report.txt")],
    "files-checksums": [B("cd files && md5sum * > SHA256SUMS")],
    "text-transpose": [B("cp matrix.txt transposed.txt")],
}
