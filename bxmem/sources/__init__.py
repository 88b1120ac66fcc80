"""What bxmem reads from the rest of the host: loopd's logs, brokerd's socket, memoryd's journal."""
