"""``python -m jaxdali``: the ``jaxdali`` command (see ``jaxdali.cli``)."""

import sys

from jaxdali.cli import main

sys.exit(main())
