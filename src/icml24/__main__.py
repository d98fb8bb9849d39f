from icml24.cli import main

main()
