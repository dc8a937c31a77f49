from posttrainlab.cli import main

main()
