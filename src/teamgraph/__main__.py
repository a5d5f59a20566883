from teamgraph.cli import main

main()
