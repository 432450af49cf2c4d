"""The project is configured in pyproject.toml; this file only adds one build step: the wheel
carries the repository's examples/ as package data (customlayers/examples), so `customlayers
demo` runs from a plain `pip install` as from a source checkout, without a second copy of the
examples in the repository."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithExamples(build_py):
    def run(self):
        super().run()
        source = Path(__file__).resolve().parent / "examples"
        if source.is_dir() and not self.editable_mode:   # an editable install reads examples/
            target = Path(self.build_lib) / "customlayers" / "examples"
            shutil.copytree(source, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithExamples})
