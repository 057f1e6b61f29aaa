"""mqha shared kernel: ids, response codes, the error tree, config parsing, clock.

Everything in this package is core code: it imports nothing else of ours and does no IO
beyond the few-line monotonic clock in ``clock.py``.
"""
