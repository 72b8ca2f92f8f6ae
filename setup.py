"""Package layout (the rest is in pyproject.toml): the packages are found automatically, and the
checkout's assets/ folder (trained parts, fusion weights, their cards) goes into the wheel as
``engine/assets``, where ``engine.settings.folders`` looks when there is no checkout around it;
the app's example manual (``app/shared/example_manual/``) goes in beside the module that reads it
(``app.shared.examples``); ``app.*`` takes in the app's packages (one per tab, ``app.shared``,
``app.views``, ``app.server``)."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["engine", "engine.*", "storage", "storage.*", "app",
                                    "app.*"]) + ["engine.assets"],
    package_dir={"engine.assets": "assets"},
    package_data={"engine.assets": ["*.safetensors", "*.json", "*.md"],
                  "app.shared": ["example_manual/*.pdf", "example_manual/*.md",
                                 "example_manual/*.jsonl"]},
    include_package_data=False,
)
