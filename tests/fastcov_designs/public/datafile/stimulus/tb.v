module tb;
  reg clk = 0, clr = 1;
  reg [7:0] a = 0, b = 0;
  wire [19:0] acc;
  wire ovf;
  integer fd, n, x, y;
  mac dut (.clk(clk), .clr(clr), .a(a), .b(b), .acc(acc), .ovf(ovf));
  always #5 clk = ~clk;
  initial begin
    fd = $fopen("vectors.txt", "r");
    if (fd == 0) begin
      $display("cannot open vectors.txt");
      $finish;
    end
    @(negedge clk) clr = 0;
    while (!$feof(fd)) begin
      n = $fscanf(fd, "%d %d\n", x, y);
      if (n == 2) begin
        a = x; b = y;
        @(negedge clk);
      end
    end
    $fclose(fd);
    $display("acc=%0d ovf=%b", acc, ovf);
    $finish;
  end
endmodule
