from primekit_cli.app import main

main()
