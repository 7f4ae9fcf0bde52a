from dagflow.cli import main

main()
