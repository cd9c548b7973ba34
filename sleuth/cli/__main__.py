from sleuth.cli import main

main()
