"""Loaded by Python at start-up when this folder is on PYTHONPATH (see run.sh)."""

import itertools

import nvidia_alias

nvidia_alias.install()

try:
    import nose2.tools
    import nose2.tools.params
except ImportError:  # a spawned worker or a run without nose2
    pass
else:
    # nose2's cartesian_params keeps a one-shot iterator, so a parameterised method of a base test
    # class is enumerated for the first subclass only (or for none); keep the cases as a list.
    def cartesian_params(*param_lists):
        def decorate(test):
            test.paramList = list(itertools.product(*param_lists))
            return test

        return decorate

    nose2.tools.cartesian_params = nose2.tools.params.cartesian_params = cartesian_params
