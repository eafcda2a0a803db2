"""What both the logical units (``corral.cmdlib``) and the query resources
(``corral.master.resources``) use; neither of those imports the other."""
