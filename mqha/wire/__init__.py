"""The one wire layer (docs/architecture.md §2, §8): every HTTP body, Raft record and snapshot as a
frozen msgspec struct, checked while decoding and encoded in one place.

``types`` (named constrained types), ``codec`` (encoders, decoders, remarks), ``controller_api``,
``broker_api``, ``records``, ``snapshot``. Requests are strict (wrong type, range, missing or unknown
field -> ``RequestError`` naming the field); reply payloads ignore unknown fields so that an older
client keeps working against a newer controller.
"""
