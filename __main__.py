"""``python -m dpsyn``: the same command line as the ``dpsyn`` script (main.py), named alike in its help."""
import sys

from dpsyn.main import main

sys.argv[0] = "dpsyn"
sys.exit(main())
