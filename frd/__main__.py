import sys

from frd.cli import main

sys.exit(main())
