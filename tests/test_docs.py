"""The README is the front door and docs/ the site: the README stays short, and every page it or the site's
nav names exists. The site itself is built by `make docs` (`mkdocs build --strict`, in CI), not here; these
tests read the files, and run the two generators of docs/_hooks/reference.py the build runs."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MAX_README_LINES = 220
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that point into the repository (no URL, no in-page anchor), code
    blocks left out."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    return []


def site_pages() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_hooks" not in p.parts}


def test_readme_is_at_most_220_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move text into docs/ (at most 220)"


def test_every_file_the_readme_links_exists_and_it_links_the_newcomer_path() -> None:
    links = relative_links(README)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
    for page in ("install.md", "guides/own-environment.md", "mixture-files.md", "guides/training.md"):
        assert f"docs/{page}" in links, f"the README does not link docs/{page}"
    assert "docs/guides/evaluation.md" in links and "docs/cli.md" in links


def test_every_nav_page_exists_and_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = nav_pages(config["nav"])
    missing = [page for page in nav if not (DOCS / page).is_file()]
    assert not missing, f"mkdocs.yml's nav names missing pages: {missing}"
    assert site_pages() - set(nav) == set(), "every page of docs/ is reachable from the nav"


def test_every_link_between_pages_points_to_a_file() -> None:
    broken = [
        f"{page}: {link}"
        for page in sorted(site_pages())
        for link in relative_links(DOCS / page)
        if link and not (DOCS / page).parent.joinpath(link).resolve().exists()
    ]
    assert not broken, broken


@functools.cache
def load_generators() -> Any:
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mixture_reference_names_every_key_of_every_model() -> None:
    from ormix.config import MixtureConfig

    reference = load_generators()
    text = reference.mixture_reference()
    models = reference._models(MixtureConfig)
    assert {"MixtureConfig", "MemberConfig", "AdaptiveConfig", "TelemetryConfig"} <= {
        m.__name__ for m in models
    }
    for model in models:
        section = text.split(f"### {model.__name__}\n", 1)[1].split("\n### ", 1)[0]
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}`" in section, (model.__name__, name)
    assert "| `seed` | integer | `0` | ≥ 0 |" in text


def test_the_cli_reference_names_every_command_and_option() -> None:
    import typer.main

    from ormix.app import app

    text = load_generators().cli_reference()
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if command.hidden:
            continue
        section = text.split(f"### ormix {name}\n", 1)[1].split("\n### ", 1)[0]
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in section, (name, param.opts)
    assert "### ormix train" in text and "`--max-steps`" in text


@given(st.text())
def test_a_table_cell_is_one_line_and_never_ends_the_cell(text: str) -> None:
    cell = load_generators()._cell(text)
    assert "\n" not in cell and "\r" not in cell
    assert re.search(r"(?<!\\)\|", cell) is None


def test_every_yaml_block_of_the_readme_and_docs_parses():
    """A reader pastes them: an unquoted `${VAR}` inside `{...}` (YAML's own braces) once broke one."""
    blocks = [
        (page.relative_to(ROOT), m.group(1))
        for page in (README, *sorted(DOCS.rglob("*.md")))
        for m in re.finditer(r"```ya?ml\n(.*?)```", page.read_text(), re.S)
    ]
    assert len(blocks) >= 5
    for page, block in blocks:
        try:
            yaml.safe_load(block)
        except yaml.YAMLError as e:
            raise AssertionError(f"{page}: a yaml block does not parse: {e}") from None
