"""What a project declares it needs, read from pyproject.toml, its dynamic metadata, setup.cfg and setup.py, never run."""

from __future__ import annotations

from pathlib import Path

from support.kernel_library import FILES, MARKER

from roofwatch.workers.declared_requirements import declared


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def summary(root: Path) -> tuple[dict[str, tuple[str, str | None, str]], list[str]]:
    skipped: list[str] = []
    found = declared(root, skipped)
    return {name: (d.requirement, d.extra, d.source) for name, d in found.items()}, skipped


def test_setup_py_is_read_through_functions_and_names_and_never_run(tmp_path: Path) -> None:
    root = write(tmp_path, {"setup.py": FILES["setup.py"], "pyproject.toml": FILES["pyproject.toml"]})

    found, skipped = summary(root)

    assert found == {
        "torch": ("torch>=2.0", None, "setup.py"), "triton": ("triton>=3.0", None, "setup.py"),
        "pytest": ("pytest>=7", "test", "setup.py"), "minikern-testkit": ("minikern-testkit>=1.2", "test", "setup.py"),
        "matplotlib": ("matplotlib", "plots", "setup.py")}
    assert skipped == []
    assert not any(p.name == MARKER for p in tmp_path.rglob("*"))


def test_setup_py_requirements_files_and_what_cannot_be_read_without_running_it(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "setup.py": ("from setuptools import setup\nimport os\n\n"
                     "def read(name):\n    return open(name).read().splitlines()\n\n"
                     "BASE = ['numpy']\n"
                     "setup(install_requires=BASE + read('requirements.txt'),\n"
                     "      extras_require={'gpu': [os.environ['CUDA_PKG']]})\n"),
        "requirements.txt": "# pinned\neinops>=0.7  # tensors\n-r other.txt\n--index-url https://x\n\nsafetensors\n",
    })

    found, skipped = summary(root)

    assert found == {
        "numpy": ("numpy", None, "setup.py"), "einops": ("einops>=0.7", None, "setup.py"),
        "safetensors": ("safetensors", None, "setup.py")}
    assert skipped == ["setup.py: extras_require (line 9) is computed in a way not read without running it; "
                       "its requirements are not known"]


def test_a_computed_value_naming_one_requirements_file_reads_that_file(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(install_requires=open('requirements.txt').read().splitlines())\n",
        "requirements.txt": "einops>=0.7\nnot a requirement!\n"})

    found, skipped = summary(root)

    assert found == {"einops": ("einops>=0.7", None, "setup.py")}
    assert skipped == ["setup.py: 'not a requirement!' is not a requirement (PEP 508); not installed"]


def test_dynamic_metadata_and_setup_cfg_are_read_and_a_base_dependency_wins_over_an_extra(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pyproject.toml": ('[project]\nname = "x"\ndynamic = ["dependencies", "optional-dependencies"]\n'
                           '[tool.setuptools.dynamic]\ndependencies = { file = ["requirements.txt"] }\n'
                           'optional-dependencies.bench = { file = ["requirements-bench.txt"] }\n'),
        "requirements.txt": "torch>=2.1\n",
        "requirements-bench.txt": "pandas\ntorch\n",
        "setup.cfg": "[options]\ninstall_requires =\n    packaging; python_version >= '3'\n"
                     "[options.extras_require]\nplots = matplotlib>=3\n",
    })

    found, skipped = summary(root)

    assert found == {"torch": ("torch>=2.1", None, "requirements.txt"),
                     "pandas": ("pandas", "bench", "requirements-bench.txt"),
                     "packaging": ("packaging", None, "setup.cfg"),
                     "matplotlib": ("matplotlib>=3", "plots", "setup.cfg")}
    assert skipped == []


def test_a_setup_py_that_does_not_parse_or_reads_through_a_link_is_named(tmp_path: Path) -> None:
    root = write(tmp_path, {"setup.py": "setup(install_requires=[\n"})
    (tmp_path / "requirements.txt").symlink_to("/etc/passwd")
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.dynamic]\ndependencies = {file = "requirements.txt"}\n')

    found, skipped = summary(root)

    assert found == {}
    assert skipped == ["'requirements.txt' is or goes through a symbolic link; it is not read",
                       "setup.py: not parsed (SyntaxError); the requirements it declares are not known"]
