"""Ship the top-level grammar/ and stdlib/ folders inside the wheel as gsrlang/_data/."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLanguageData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).parent
        for folder in ("grammar", "stdlib"):
            shutil.copytree(root / folder, Path(self.build_lib) / "gsrlang" / "_data" / folder, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithLanguageData})
