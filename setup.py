"""Ship the language's data inside the wheel as gsrlang/_data/: the grammar, the stdlib, and what the
LLM compiler's prompt is built from (docs/language.md and the example programs)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLanguageData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).parent
        data = Path(self.build_lib) / "gsrlang" / "_data"
        for folder in ("grammar", "stdlib"):
            shutil.copytree(root / folder, data / folder, dirs_exist_ok=True)
        (data / "docs").mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / "docs" / "language.md", data / "docs" / "language.md")
        for program in (root / "examples").rglob("*.gsr"):
            target = data / "examples" / program.relative_to(root / "examples")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(program, target)


setup(cmdclass={"build_py": BuildWithLanguageData})
