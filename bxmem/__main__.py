from bxmem.start.entry import console

console()
