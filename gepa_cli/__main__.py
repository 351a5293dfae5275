from gepa_cli.app import main

main()
