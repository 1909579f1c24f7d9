from corolla.cli import main

raise SystemExit(main())
