"""The config model's field docstrings, read from the source when a reader asks for them.

Each field of the model is documented by the string literal under it; those strings are
the single source of the configuration reference (``docs/configuration.md``) and of the
descriptions in ``replicator config schema``. Why not pydantic's
``use_attribute_docstrings``: it parses the source of every model class as the class is
created, in every process that imports the config — 0.1 s of the 0.24 s that importing
the package took, paid by each Spark Python worker of every run, each service and each
command, none of which shows a description. Only the two readers above call
:func:`documented`, once per process.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel

from replicator.core.config.model import Config


def documented(model: type[BaseModel] = Config) -> type[BaseModel]:
    """``model`` with every field of it and of the models it holds described by its
    docstring (a description given in ``Field`` wins), their schemas rebuilt so that the
    JSON Schema carries them. Idempotent: each model is documented once per process."""
    for each in _models(model):
        _document(each)
    return model


@cache
def _document(model: type[BaseModel]) -> None:
    """One model's fields described, its schema rebuilt (the models it holds first: see
    :func:`_models`)."""
    docs: dict[str, str] = {}
    for owner in reversed(model.__mro__):
        if issubclass(owner, BaseModel) and owner is not BaseModel:
            docs.update(attribute_docstrings(owner))
    for name, field in model.model_fields.items():
        if field.description is None and name in docs:
            field.description = docs[name]
    model.model_rebuild(force=True)


def attribute_docstrings(cls: type) -> dict[str, str]:
    """{field name: its docstring} of the fields ``cls``'s own body annotates: the string
    literal right after the annotated assignment, cleaned as a docstring. Pure (reads the
    class's source)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for annotated, following in itertools.pairwise(body):
        if (
            isinstance(annotated, ast.AnnAssign)
            and isinstance(annotated.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[annotated.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """``model`` and every model its fields hold, the held ones first (a schema is
    rebuilt from the schemas of the models it holds)."""
    order: list[type[BaseModel]] = []

    def visit(each: type[BaseModel]) -> None:
        if each in order:
            return
        for field in each.model_fields.values():
            for held in _held_models(field.annotation):
                visit(held)
        order.append(each)

    visit(model)
    return order


def _held_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return []
    return [held for arg in typing.get_args(annotation) for held in _held_models(arg)]
