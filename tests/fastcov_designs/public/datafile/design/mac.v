module mac (
  input  wire        clk,
  input  wire        clr,
  input  wire [7:0]  a,
  input  wire [7:0]  b,
  output reg  [19:0] acc,
  output wire        ovf
);
  always @(posedge clk) begin
    if (clr) acc <= 0;
    else acc <= acc + a * b;
  end
  assign ovf = acc[19];
endmodule
