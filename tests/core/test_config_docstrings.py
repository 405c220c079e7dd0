"""Field docstrings are read from the source only by the readers that show them (the
reference and ``config schema``), not by every process importing the config."""

from __future__ import annotations

import subprocess
import sys

from pydantic import BaseModel, Field

from replicator.core.config import Config
from replicator.core.config.docstrings import _models, attribute_docstrings, documented


class Sample(BaseModel):
    """A model of the test's own."""

    plain: int = 1
    """The docstring of ``plain``."""

    described: int = Field(2, description="given in Field")
    """Not used: a description given in ``Field`` wins."""

    bare: int = 3
    assert bare
    """Not the docstring of ``bare``: it does not follow the annotation."""

    def method(self) -> None:
        inner: int = 4
        """Not a field."""
        del inner


def test_a_docstring_is_the_string_right_under_an_annotated_field():
    assert attribute_docstrings(Sample) == {
        "plain": "The docstring of ``plain``.",
        "described": "Not used: a description given in ``Field`` wins.",
    }
    documented(Sample)
    fields = Sample.model_fields
    assert fields["plain"].description == "The docstring of ``plain``."
    assert fields["described"].description == "given in Field"
    assert fields["bare"].description is None


def test_importing_the_config_reads_no_docstring_and_documented_reads_them_all():
    code = (
        "from replicator.core.config import Config, load_config\n"
        "load_config('config.example.toml')\n"  # schemas built before documenting
        "print(Config.model_fields['relay'].description)\n"
        "from replicator.core.config.docstrings import documented\n"
        "schema = documented().model_json_schema()\n"
        "print(bool(schema['$defs']['RelayConfig']['properties']['origin']['description']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]


def test_every_field_of_the_config_is_described():
    documented()
    missing = [
        f"{model.__name__}.{name}"
        for model in _models(Config)
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert missing == []
