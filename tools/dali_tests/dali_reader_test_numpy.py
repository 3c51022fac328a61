"""Stand-in for DALI's ``reader/test_numpy.py`` helper (run.sh links it there)."""


def is_gds_supported() -> bool:
    """GPUDirect Storage is never available here."""
    return False
