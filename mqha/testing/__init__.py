"""TEST ONLY: seams that tests and the chaos harness use to break mqha on purpose.

Nothing in a production code path imports this package; the broker's process wiring consults it
once, at start-up, and only when the environment asks for a planted bug.
"""
