"""API message types shared by the controller and its clients (docs/architecture.md §2, §3).

Frozen dataclasses with ``to_json()`` / ``from_json()``. Requests are parsed strictly (wrong type,
missing required field, unknown field -> ``RequestError`` 2005 naming the field); replies are parsed
leniently on unknown fields so that an older client keeps working against a newer controller.
"""
